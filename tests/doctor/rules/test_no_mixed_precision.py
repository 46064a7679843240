"""no-mixed-precision: the share of matmul/conv GPU time that misses tensor cores."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from gpu_traces import add_kernels, gpu_builder, recorded, write

from torchpace.doctor.facts.precision import kernel_precision
from torchpace.doctor.finding import Severity
from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.no_mixed_precision import no_mixed_precision
from torchpace.fixes.policy import mentions_device_code
from torchpace.policy.threads import FewerThreads
from torchpace.runner.sensors.host import DeviceRecord, HostRecord
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.model import ModelRecord


def test_fires_on_recorded_fp32_resnet_on_v100() -> None:
    (finding,) = no_mixed_precision(recorded("loader_workers/resnet50_v100_num_workers_0"))
    assert finding.evidence["missed_tensor_core_fraction"] == 1.0
    assert 40 < float(finding.evidence["fp32_matmul_ms_per_step"]) < 90  # cuDNN fp32 conv kernels
    assert "GradScaler" in finding.fix and "float16" in finding.fix  # Volta: fp16, not bf16
    assert 'Precision("auto")' in finding.fix
    assert finding.saving_ms is not None and 0 < finding.saving_ms < 64
    assert "x GPU busy share" in finding.saving_method


def test_silent_on_recorded_a100_that_uses_tf32_tensor_cores() -> None:
    assert no_mixed_precision(recorded("nccl/nccl_a100")) == []


def test_cpu_trace_is_not_applicable() -> None:
    with pytest.raises(NotApplicable, match="does not record"):
        no_mixed_precision(recorded("cpu_only/gloo_rank34_of300"))


CPU_BF16_RUN = Inspection(
    device=DeviceRecord(kind="cpu"),
    host=HostRecord(cpu_bf16="avx512_bf16"),
    model=ModelRecord(autocast_in_forward=False),
)


LSTM = Path(__file__).parents[2] / "fixtures/traces/lstm_under_load"


def _beside_busy_loops(ready_ms: float, fewer: FewerThreads | None = None) -> Inspection:
    """The loaded LSTM run's live readings: 2 torch threads, 2 cores, others 1.0 of them."""
    host = HostRecord(
        cpu_bf16="avx512_bf16", cores=2, torch_threads=2, others_cores=1.0,
        ready_ms_per_step=ready_ms, fewer_threads=fewer,
    )  # fmt: skip
    return replace(CPU_BF16_RUN, host=host, step_ms=3386.8)


# The same script beside two busy loops under this doctor (2026-11-28, torch 2.14.1): 3 steps at
# torch.set_num_threads(1) took 143.1 ms against 222.6 ms at 2, and the 2 after them, profiled as
# the window was, 111.4 ms with 58.6 ms of matmuls, 33.9 ms of it waiting for a core (20 waits).
LSTM_AT_ONE_THREAD = FewerThreads(
    2, 1, 222.6, 143.1, 3, math_ms=58.6, math_step_ms=111.4, math_ready_ms=33.9, math_waits=20
)


def test_cpu_matmuls_beside_busy_loops_are_not_judged_with_threads_waiting_for_cores() -> None:
    """The word-language LSTM: 50% of the step in fp32 matmuls quiet, 2.9% beside two busy loops,
    under the rule's 5% line; mnist_rnn's went the other way, 0.6% quiet to 5.3% loaded, over it
    (a LOW finding its quiet run lacked). Two threads on one free core wait for each other at
    every op, some far longer than others: the share is not judged, and says why."""
    from torchpace.trace import load_trace

    quiet = load_trace(LSTM / "quiet.pt.trace.json.gz")
    loaded = load_trace(LSTM / "loaded.pt.trace.json.gz")
    (q,) = no_mixed_precision(quiet, live=CPU_BF16_RUN)
    assert q.severity is Severity.LOW
    with pytest.raises(NotApplicable, match="not judged") as e:
        no_mixed_precision(loaded, live=_beside_busy_loops(1701.6))
    assert "some ops far more than others" in e.value.reason
    assert "set_num_threads(1)" in e.value.enable
    # The same share over the line is not judged either (its quiet run's may be under it).
    with pytest.raises(NotApplicable, match="not judged"):
        no_mixed_precision(loaded, live=_beside_busy_loops(1701.6), min_step_fraction=0.01)
    # Without the contention reading the share is what it is: under the line, nothing found.
    assert no_mixed_precision(loaded, live=CPU_BF16_RUN) == []


def test_cpu_matmuls_beside_busy_loops_are_judged_from_the_steps_at_fewer_threads() -> None:
    """At one thread on the one free core no op waits for another thread: the LSTM's matmuls
    took 53% of those steps; their own time is 43-76% of the step without its waits for a core
    (which fell on them by their share, give or take chance, or not at all), which bounds a quiet
    step's at 2 threads to 20-86% (its quiet run read 50%): LOW, as quiet. Where even the most is under the line, nothing; where the line falls
    between, not judged, saying so; a compiled run (eager there) is not judged as before."""
    from torchpace.trace import load_trace

    loaded = load_trace(LSTM / "loaded.pt.trace.json.gz")
    (f,) = no_mixed_precision(loaded, live=_beside_busy_loops(1701.6, LSTM_AT_ONE_THREAD))
    assert f.severity is Severity.LOW and "20%-86% of a quiet step" in f.summary
    assert f.evidence["quiet_step_fraction_least"] == 0.2
    assert "58.6 ms of matmuls/convolutions in a 111.4 ms step" in f.caveat
    under = replace(LSTM_AT_ONE_THREAD, math_ms=1.5)  # 1.9% of the step without waits: 3.8%
    assert no_mixed_precision(loaded, live=_beside_busy_loops(1701.6, under)) == []
    between = replace(LSTM_AT_ONE_THREAD, math_ms=6.5)  # 0.4-15.5%
    with pytest.raises(NotApplicable, match="line falls between"):
        no_mixed_precision(loaded, live=_beside_busy_loops(1701.6, between))
    with pytest.raises(NotApplicable, match="not judged"):
        eager = replace(LSTM_AT_ONE_THREAD, eager=True)
        no_mixed_precision(loaded, live=_beside_busy_loops(1701.6, eager))


def test_cpu_with_native_bf16_gets_cpu_autocast() -> None:
    """A recorded CPU transformer (fp32, shapes recorded): 66 of 174 ms per step in aten::mm and
    addmm. On a CPU with AVX512-BF16 the fix is CPU autocast, and says the numerics change."""
    (f,) = no_mixed_precision(recorded("user_labels/cpu_transformer_labels"), live=CPU_BF16_RUN)
    assert 50 < float(f.evidence["fp32_matmul_ms_per_step"]) < 90  # type: ignore[arg-type]
    assert f.evidence["cpu_bf16"] == "avx512_bf16"
    assert 'torch.amp.autocast("cpu", dtype=torch.bfloat16)' in f.fix
    assert not mentions_device_code(f.fix) and "cuda" not in f.fix.lower()
    assert "Changes numerics" in f.caveat and "precision of the math" in f.fix
    assert f.saving_ms is None and "Not estimated" in f.caveat  # the gain depends on the layers
    assert f.severity is Severity.LOW
    # Without AMX it is often a loss (nanoGPT ran 0.48x on this machine): measure before keeping.
    assert "often no gain" in f.caveat and "--verify" in f.fix
    amx = replace(CPU_BF16_RUN, host=HostRecord(cpu_bf16="amx"))
    (g,) = no_mixed_precision(recorded("user_labels/cpu_transformer_labels"), live=amx)
    assert "often no gain" not in g.caveat and "(AMX)" in g.fix


def test_cpu_without_native_bf16_or_unknown_is_skipped() -> None:
    trace = recorded("user_labels/cpu_transformer_labels")
    with pytest.raises(NotApplicable, match="no native bf16"):
        no_mixed_precision(
            trace,
            live=Inspection(device=DeviceRecord(kind="cpu"), host=HostRecord(cpu_bf16="none")),
        )
    with pytest.raises(NotApplicable, match="does not record"):
        no_mixed_precision(trace, live=Inspection(device=DeviceRecord(kind="cpu")))


def test_cpu_dtypes_unrecorded_need_the_live_run() -> None:
    """A CPU conv net recorded without shapes: the live run's 'no autocast' makes it fp32."""
    trace = recorded("compare_pairs/cheap_0_workers")
    (f,) = no_mixed_precision(trace, live=CPU_BF16_RUN)
    assert "cuda" not in f.fix.lower()
    # Its longest ops are named, as the ops the live run says ran in fp32 (the doctor records
    # no shapes on a CPU: accelerate's BERT example read "100% fp32, top_fp32_ops: none").
    top = f.evidence["top_fp32_ops"]
    assert isinstance(top, list) and top and top[0]["op"].startswith("aten::")  # type: ignore[index]
    with pytest.raises(NotApplicable, match="no dtypes"):
        no_mixed_precision(
            trace, live=Inspection(device=DeviceRecord(kind="cpu"), host=HostRecord(cpu_bf16="amx"))
        )


def test_cpu_matmuls_are_read_in_the_median_step_not_their_mean() -> None:
    """Fabric's PPO on 2 CPU ranks beside two busy loops: in 2 of 9 steps the scheduler preempted
    an mm for its time slice (~4 ms), a mean of 1.33 ms of fp32 matmuls a step (8.9%, a LOW
    finding the quiet run lacked) where the median step holds 0.46 ms (3.1%; quiet: 2.9%)."""
    loaded = recorded("ppo_under_load/ppo_loaded_rank1")
    assert max(op.dur_us for op in loaded.ops_named(("aten::mm",))) > 4000
    assert no_mixed_precision(loaded, live=CPU_BF16_RUN) == []
    assert no_mixed_precision(recorded("ppo_under_load/ppo_quiet_rank1"), live=CPU_BF16_RUN) == []
    (f,) = no_mixed_precision(loaded, live=CPU_BF16_RUN, min_step_fraction=0.02)
    assert f.evidence["fp32_matmul_ms_per_step"] == pytest.approx(0.46, abs=0.01)


def test_gpu_keeps_cuda_autocast() -> None:
    (f,) = no_mixed_precision(
        recorded("loader_workers/resnet50_v100_num_workers_0"),
        live=Inspection(device=DeviceRecord(kind="cuda"), host=HostRecord(cpu_bf16="avx512_bf16")),
    )
    assert 'torch.amp.GradScaler("cuda")' in f.fix and 'autocast("cuda"' in f.fix


def test_fires_on_a_share_not_only_when_tensor_core_time_is_zero(tmp_path: Path) -> None:
    b = gpu_builder(8, 0)
    add_kernels(b, "ampere_sgemm_128x64_nn", 10, 300)  # 3 ms fp32
    add_kernels(b, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nn", 10, 100)  # 1 ms bf16
    (finding,) = no_mixed_precision(write(b, tmp_path, "synthetic_partial_amp"))
    assert finding.evidence["missed_tensor_core_fraction"] == pytest.approx(0.75, abs=0.01)
    assert "bfloat16" in finding.fix


def test_silent_below_the_share_threshold_and_before_volta(tmp_path: Path) -> None:
    b = gpu_builder(8, 0)
    add_kernels(b, "ampere_sgemm_128x64_nn", 2, 300)
    add_kernels(b, "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_nn", 10, 300)
    assert no_mixed_precision(write(b, tmp_path, "synthetic_mostly_amp")) == []


def test_before_volta_says_there_are_no_tensor_cores(tmp_path: Path) -> None:
    pascal = gpu_builder(6, 0)
    add_kernels(pascal, "maxwell_sgemm_128x64_nn", 10, 300)
    with pytest.raises(NotApplicable, match=r"6\.0 GPU has no tensor cores"):
        no_mixed_precision(write(pascal, tmp_path, "synthetic_pascal"))


def test_unknown_device_is_skipped_with_the_reason(tmp_path: Path) -> None:
    # No deviceProperties, and kernel names that name no architecture: it cannot judge.
    b = gpu_builder(8, 0)
    b.top["deviceProperties"] = []
    add_kernels(b, "void gemm_kernel<float>(float*)", 10, 300)
    with pytest.raises(NotApplicable, match="does not say which GPU"):
        no_mixed_precision(write(b, tmp_path, "synthetic_unknown_device"))


def test_architecture_read_from_kernel_names_without_device_properties(tmp_path: Path) -> None:
    b = gpu_builder(7, 0)
    b.top["deviceProperties"] = []
    add_kernels(b, "volta_sgemm_128x64_nn", 10, 300)
    (finding,) = no_mixed_precision(write(b, tmp_path, "synthetic_volta_no_properties"))
    assert finding.evidence["compute_capability"] == "7.0 (kernel names)"
    assert "GradScaler" in finding.fix  # Volta: fp16, not bf16


def test_live_run_confirms_or_explains(tmp_path: Path) -> None:
    b = gpu_builder(8, 0)
    add_kernels(b, "ampere_sgemm_128x64_nn", 10, 300)
    trace = write(b, tmp_path, "synthetic_fp32")
    (off,) = no_mixed_precision(
        trace,
        live=Inspection(
            device=DeviceRecord(kind="cuda"), model=ModelRecord(autocast_in_forward=False)
        ),
    )
    assert "confirms no autocast" in off.summary and off.caveat == ""
    (on,) = no_mixed_precision(
        trace,
        live=Inspection(
            device=DeviceRecord(kind="cuda"),
            model=ModelRecord(autocast_in_forward=True, autocast_dtype="bfloat16"),
        ),
    )
    assert "autocast (bfloat16) is on" in on.summary


@pytest.mark.parametrize(
    ("name", "precision"),
    [
        ("volta_sgemm_128x64_nn", "fp32"),
        ("volta_h884gemm_64x64_ldg8_nn", "reduced"),
        ("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", "reduced"),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(...)", "tf32"),
        ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", "tf32"),
        ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn", "reduced"),
        ("cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "fp32"),
        (
            "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>",
            "fp32",
        ),
        ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>", "layout"),
        ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1", "fp32"),
        ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x128x64", "reduced"),
        ("void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>", "fp32"),
        ("nvjet_hsh_192x192_64x3_2x1_v_bz_coopB_NTN", "reduced"),  # Hopper cuBLAS, fp16
        ("nvjet_tst_128x256_64x6_2x1_2cta_v_bz_TNT", "reduced"),  # Hopper cuBLAS, bf16
        ("nvjet_sm90_hss_320x128_64x3_2x1_v_bz_NNT", "reduced"),
        ("nvjet_qqs_128x128_64x4_1x2_h_bz_TNT", "unknown"),  # tensor cores, type unsaid
    ],
)
def test_kernel_precision_from_names(name: str, precision: str) -> None:
    assert kernel_precision(name) == precision
