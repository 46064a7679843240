"""On a CPU run no rule prescribes accelerator code (grep the fixes): one policy spells them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from torchpace.doctor.diagnose import diagnose
from torchpace.fixes.policy import mentions_device_code
from torchpace.runner.sensors.flags import FlagsRecord
from torchpace.runner.sensors.host import DeviceRecord, HostRecord
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.loader import LoaderFacts
from torchpace.runner.sensors.model import ConvBnPair, GradForward, ModelRecord
from torchpace.trace import Trace, load_trace

FIXTURES = Path(__file__).parents[2] / "fixtures" / "traces"

# deprecated-api translates the API the script called (torch.cuda.amp.autocast -> its successor).
API_TRANSLATION = {"deprecated-api"}

LOADER = LoaderFacts(
    num_workers=12, batch_size=32, pin_memory=True, persistent_workers=False, prefetch_factor=2,
    iterable=False, wait_fraction=0.4, wait_cpu_fraction=0.05, epochs_started=3,
)  # fmt: skip
CPU_RUN = Inspection(
    device=DeviceRecord(kind="cpu", count=0),
    host=HostRecord(cores=2, cpu_bf16="avx512_bf16", torch_threads=8),
    flags=FlagsRecord(
        anomaly_detection=True,
        deterministic_algorithms=True,
        cudnn_deterministic=True,
        debug_apis=("torch.autograd.set_detect_anomaly(True): every backward op is checked",),
    ),
    model=ModelRecord(
        conv_layers=6,
        conv_input_channels_last=False,
        conv_bias_before_bn=(ConvBnPair("0", "1"),),
        param_dtypes=(("float64", 1000),),
        grad_forwards=(GradForward("Net", False, 3),),
        backward_calls=1,
        optimizer_steps=1,
        autocast_in_forward=False,
    ),
    loaders=(LOADER,),
    step_ms=50.0,
)


def test_no_accelerator_code_in_any_fix_for_a_cpu_run(
    trace_fixture: Callable[[str], Trace],
) -> None:
    seen = set()
    for name in ("loader_workers/cpu_sleepy_loader", "healthy/cpu_fast_loader"):
        for f in diagnose(trace_fixture(name), live=CPU_RUN).findings:
            seen.add(f.rule)
            if f.rule not in API_TRANSLATION:
                assert not mentions_device_code(f.fix), f"{f.rule}: {f.fix}"
    # The rules that print loader, layout, thread, debug and precision code all spoke.
    assert {"dataloader-stall", "loader-config", "channels-last", "cpu-threads",
            "debug-api-enabled", "no-mixed-precision"} <= seen  # fmt: skip


CPU_TRACES = ("ddp_gloo_2rank/straggler_data", "ddp_gloo_2rank/straggler_seqlen",
              "ddp_gloo_2rank/token_budget", "user_labels/cpu_transformer_labels",
              "compare_pairs/cheap_0_workers", "loader_workers/mlp_sleepy_dataset_torch2.13")  # fmt: skip


def test_no_accelerator_code_on_recorded_cpu_runs(trace_fixture: Callable[[str], Trace]) -> None:
    """Every recorded CPU run (rank folders through the multi-rank rules too), as the doctor on
    this CPU would see it: whatever fires prescribes no accelerator code."""
    seen = set()
    for name in CPU_TRACES:
        folder = FIXTURES / name
        traces = [load_trace(p) for p in sorted(folder.glob("rank*"))] if folder.is_dir() else [
            trace_fixture(name)]  # fmt: skip
        for f in diagnose(traces, live=CPU_RUN).findings:
            seen.add(f.rule)
            if f.rule not in API_TRANSLATION:
                assert not mentions_device_code(f.fix), f"{name} {f.rule}: {f.fix}"
    assert {"rank-imbalance", "no-mixed-precision"} <= seen


def test_gpu_runs_keep_their_cuda_fixes(trace_fixture: Callable[[str], Trace]) -> None:
    """The same rules on a recorded V100 run (fp32, a stalled loader) print CUDA code."""
    loader = replace(LOADER, num_workers=0, pin_memory=False, wait_cpu_fraction=0.9)
    gpu_run = replace(
        CPU_RUN,
        device=DeviceRecord(kind="cuda", compute_capability=(7, 0), count=1),
        host=replace(CPU_RUN.host, cores=16),
        loaders=(loader,),
    )
    fixes = {f.rule: f.fix for f in
             diagnose(trace_fixture("loader_workers/resnet50_v100_num_workers_0"),
                      live=gpu_run).findings}  # fmt: skip
    assert 'torch.amp.GradScaler("cuda")' in fixes["no-mixed-precision"]
    assert "pin_memory=True" in fixes["dataloader-stall"]
    assert 'x.to("cuda", memory_format=torch.channels_last' in fixes["channels-last"]
