"""low-sm-efficiency: a busy GPU whose kernels launch fewer thread blocks than it has SMs."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_traces import FIXTURES, gpu_builder, recorded, write

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.low_sm_efficiency import low_sm_efficiency
from torchpace.trace import Trace, load_trace

CORPUS = FIXTURES.parent / "corpus"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)"


def _small_kernels(tmp_path: Path, blocks_per_sm: float) -> Trace:
    """3 steps of 10 ms, 8 ms of each in 80 elementwise kernels of `blocks_per_sm`, 108 SMs."""
    b = gpu_builder(8, 0)
    b.top["deviceProperties"][0]["numSms"] = 108
    launch = {"blocks per SM": blocks_per_sm, "est. achieved occupancy %": 12}
    for n in range(3):
        for i in range(80):
            b.kernel(ADD, n * 10_000 + 100 + i * 110, 100, args=launch)
    return write(b, tmp_path, f"synthetic_small_kernels_{blocks_per_sm}")


def test_fires_when_busy_kernels_fill_few_sms(tmp_path: Path) -> None:
    (finding,) = low_sm_efficiency(_small_kernels(tmp_path, 0.05))
    assert finding.evidence["sm_fill_fraction"] == pytest.approx(0.05, abs=0.01)
    assert finding.evidence["compute_busy_fraction"] == pytest.approx(0.8, abs=0.05)
    (top, *_) = finding.evidence["top_small_kernels"]
    assert top["blocks_count"] == 5 and top["calls_per_step"] == 80  # 0.05 x 108 SMs
    assert "108 SMs" in finding.summary and "torch.compile" in finding.fix
    assert finding.saving_ms is None and "No saving is estimated" in finding.caveat


def test_silent_when_kernels_fill_the_device(tmp_path: Path) -> None:
    assert low_sm_efficiency(_small_kernels(tmp_path, 4.0)) == []


def test_silent_on_recorded_traces_whose_busy_kernels_fill_the_gpu() -> None:
    # V100 ResNet-50 (fp32, 56% busy): its kernels fill ~99% of the SMs.
    assert low_sm_efficiency(recorded("loader_workers/resnet50_v100_num_workers_0")) == []
    assert low_sm_efficiency(recorded("large/transformer_v100_rank1of2_memory")) == []


def test_silent_when_the_gpu_mostly_waits() -> None:
    # DLRM rank 0: kernels fill ~24% of the SMs, but compute runs ~7% of the step (launch-bound
    # and comm-bound's business); its NCCL kernels use few blocks by design and are left out.
    rank0 = sorted((CORPUS / "param_v100_dlrm_8rank").iterdir())[0]
    assert low_sm_efficiency(load_trace(rank0)) == []


def test_rocm_trace_records_no_blocks_per_sm() -> None:
    with pytest.raises(NotApplicable, match="blocks per SM"):
        low_sm_efficiency(recorded("rocm/mi250_minitoy_rocm6.2"))


def test_cpu_trace_is_not_applicable() -> None:
    with pytest.raises(NotApplicable, match="no GPU kernels"):
        low_sm_efficiency(recorded("healthy/cpu_fast_loader"))
