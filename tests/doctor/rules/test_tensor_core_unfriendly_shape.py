"""tensor-core-unfriendly-shape: fp16/bf16 GEMM dimensions that are not multiples of 8."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_traces import add_matmul, gpu_builder, recorded, write

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.tensor_core_unfriendly_shape import tensor_core_unfriendly_shape
from torchpace.trace import Trace

HALF_GEMM = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_nn"


def _half_mlp(tmp_path: Path, head: int, dtype: str = "c10::Half") -> Trace:
    b = gpu_builder(8, 0)
    for n in range(3):
        add_matmul(b, n * 10_000 + 100, [[4096], [512, 1024], [1024, 4096]], dtype, HALF_GEMM, 400)
        add_matmul(
            b, n * 10_000 + 1_000, [[head], [512, 4096], [4096, head]], dtype, HALF_GEMM, 900
        )
    return write(b, tmp_path, f"synthetic_half_mlp_{head}")


def test_no_recorded_shapes_is_not_applicable_with_the_profiler_option() -> None:
    with pytest.raises(NotApplicable) as info:
        tensor_core_unfriendly_shape(recorded("nccl/nccl_a100"))
    assert info.value.enable == "torch.profiler.profile(record_shapes=True)"


def test_cpu_trace_is_not_applicable() -> None:
    with pytest.raises(NotApplicable, match="no GPU kernels"):
        tensor_core_unfriendly_shape(recorded("dataloader_stall/mlp_sleepy_dataset_torch2.13"))


def test_silent_on_recorded_fp32_resnet() -> None:
    # Shapes recorded, but all fp32: no-mixed-precision's business, not this rule's.
    assert (
        tensor_core_unfriendly_shape(recorded("dataloader_stall/resnet50_v100_num_workers_0")) == []
    )


def test_lists_misaligned_half_precision_shapes_and_ops(tmp_path: Path) -> None:
    (finding,) = tensor_core_unfriendly_shape(_half_mlp(tmp_path, head=50257))
    (row, *_) = finding.evidence["misaligned_shapes"]
    assert row["op_name"] == "aten::addmm" and row["not_multiple_of_8"] == "n=50257"
    assert (
        row["input_shapes"] == "[512, 4096] x [4096, 50257]" and row["input_dtype"] == "c10::Half"
    )
    assert finding.evidence["misaligned_fraction"] == pytest.approx(900 / 1300, rel=0.01)
    assert "50304" in finding.fix


def test_silent_when_dimensions_are_aligned(tmp_path: Path) -> None:
    assert tensor_core_unfriendly_shape(_half_mlp(tmp_path, head=50304)) == []


def test_bf16_counts_too(tmp_path: Path) -> None:
    (finding,) = tensor_core_unfriendly_shape(
        _half_mlp(tmp_path, head=1000 + 1, dtype="c10::BFloat16")
    )
    assert "n=1001" in finding.summary
