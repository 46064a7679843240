"""On a CPU run no rule prescribes accelerator code (grep the fixes): one policy spells them."""

from __future__ import annotations

from collections.abc import Callable

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.live import ConvBnPair, GradForward, Inspection, LoaderFacts
from torchpace.fixes.policy import mentions_device_code
from torchpace.trace import Trace

# deprecated-api translates the API the script called (torch.cuda.amp.autocast -> its successor).
API_TRANSLATION = {"deprecated-api"}

LOADER = LoaderFacts(
    num_workers=12, batch_size=32, pin_memory=True, persistent_workers=False, prefetch_factor=2,
    iterable=False, wait_fraction=0.4, wait_cpu_fraction=0.05, epochs_started=3,
)  # fmt: skip
CPU_RUN = Inspection(
    device_kind="cpu", cpu_cores=2, cpu_bf16="avx512_bf16", torch_threads=8, loaders=(LOADER,),
    anomaly_detection=True, deterministic_algorithms=True, cudnn_deterministic=True,
    debug_apis=("torch.autograd.set_detect_anomaly(True): every backward op is checked",),
    conv_layers=6, conv_input_channels_last=False, conv_bias_before_bn=(ConvBnPair("0", "1"),),
    param_dtypes=(("float64", 1000),), grad_forwards=(GradForward("Net", False, 3),),
    backward_calls=1, optimizer_steps=1, autocast_in_forward=False, accelerator_count=0,
    step_ms=50.0,
)  # fmt: skip


def test_no_accelerator_code_in_any_fix_for_a_cpu_run(
    trace_fixture: Callable[[str], Trace],
) -> None:
    seen = set()
    for name in ("loader_workers/cpu_sleepy_loader", "healthy/cpu_fast_loader"):
        for f in diagnose(trace_fixture(name), live=CPU_RUN).findings:
            seen.add(f.rule)
            if f.rule not in API_TRANSLATION:
                assert not mentions_device_code(f.fix), f"{f.rule}: {f.fix}"
    # The rules that print loader, layout, thread and debug code all spoke.
    assert {"dataloader-stall", "loader-config", "channels-last", "cpu-threads",
            "debug-api-enabled"} <= seen  # fmt: skip
