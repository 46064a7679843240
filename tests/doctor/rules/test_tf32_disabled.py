"""tf32-disabled: fp32 GEMMs/convolutions on CUDA cores of an Ampere+ GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_traces import add_kernels, gpu_builder, recorded, write

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.tf32_disabled import tf32_disabled
from torchpace.runner.sensors.flags import FlagsRecord
from torchpace.runner.sensors.host import DeviceRecord
from torchpace.runner.sensors.inspection import Inspection
from torchpace.trace import Trace


def _fp32_a100(tmp_path: Path, *, with_tf32: bool = False) -> Trace:
    b = gpu_builder(8, 0)
    add_kernels(b, "ampere_sgemm_128x64_nn", 10, 300)
    if with_tf32:
        add_kernels(b, "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_nn_align4>", 2, 50)
    return write(b, tmp_path, f"synthetic_a100_fp32_tf32{with_tf32}")


def test_silent_on_recorded_a100_with_tf32_on() -> None:
    # Its matmuls run cutlass tensorop s1688 (TF32) and cuDNN xmma tf32 kernels.
    assert tf32_disabled(recorded("nccl/nccl_a100")) == []


def test_v100_has_no_tf32_and_says_so() -> None:
    with pytest.raises(NotApplicable, match=r"7\.0 GPU has no TF32"):
        tf32_disabled(recorded("loader_workers/resnet50_v100_num_workers_0"))


def test_rocm_trace_is_not_applicable() -> None:
    with pytest.raises(NotApplicable, match="ROCm"):
        tf32_disabled(recorded("rocm/mi250_minitoy_rocm6.2"))


def test_cpu_trace_is_not_applicable() -> None:
    with pytest.raises(NotApplicable, match="no GPU kernels"):
        tf32_disabled(recorded("healthy/cpu_fast_loader"))


def test_fires_on_fp32_cuda_core_gemms_without_any_tf32_kernel(tmp_path: Path) -> None:
    (finding,) = tf32_disabled(_fp32_a100(tmp_path))
    assert "TF32 is off" in finding.summary and "allow_tf32 = True" in finding.fix
    assert finding.evidence["fp32_ms_per_step"] == pytest.approx(3.0, rel=0.01)
    assert finding.evidence["tf32_flag_from"].startswith("kernel names")
    assert finding.saving_ms is not None and 0 < finding.saving_ms <= 1.5


def test_one_tf32_kernel_shows_the_flag_is_on(tmp_path: Path) -> None:
    assert tf32_disabled(_fp32_a100(tmp_path, with_tf32=True)) == []


def test_live_flags_decide(tmp_path: Path) -> None:
    trace = _fp32_a100(tmp_path)
    assert (
        tf32_disabled(
            trace,
            live=Inspection(device=DeviceRecord(kind="cuda"), flags=FlagsRecord(tf32_matmul=True)),
        )
        == []
    )
    (finding,) = tf32_disabled(
        _fp32_a100(tmp_path, with_tf32=True),
        live=Inspection(device=DeviceRecord(kind="cuda"), flags=FlagsRecord(tf32_matmul=False)),
    )
    assert finding.evidence["tf32_flag_from"] == "live run" and finding.caveat == ""


def test_capability_read_from_kernel_names_is_only_a_lower_bound(tmp_path: Path) -> None:
    # No deviceProperties and CUTLASS kernels built for sm_75: an A100 or H100 could run them.
    b = gpu_builder(8, 0)
    b.top["deviceProperties"] = []
    add_kernels(b, "cutlass_75_tensorop_s1688gemm_f16_64x64_32x2_nn_align8", 2, 50)
    add_kernels(b, "void at::native::vectorized_elementwise_kernel<4, float>(int)", 10, 300)
    with pytest.raises(NotApplicable, match="not enough to tell"):
        tf32_disabled(write(b, tmp_path, "synthetic_sm75_kernels_only"))
