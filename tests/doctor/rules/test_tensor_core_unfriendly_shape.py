"""tensor-core-unfriendly-shape: fp16/bf16 GEMM dimensions that are not multiples of 8."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_traces import add_matmul, gpu_builder, recorded, write

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.tensor_core_unfriendly_shape import tensor_core_unfriendly_shape
from torchpace.trace import Trace, load_trace

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
        tensor_core_unfriendly_shape(recorded("loader_workers/mlp_sleepy_dataset_torch2.13"))


def test_silent_on_recorded_fp32_resnet() -> None:
    # Shapes recorded, but all fp32: no-mixed-precision's business, not this rule's.
    assert (
        tensor_core_unfriendly_shape(recorded("loader_workers/resnet50_v100_num_workers_0")) == []
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


CORPUS = Path(__file__).parents[2] / "fixtures" / "corpus"


def _one_matmul(tmp_path: Path, n: int, kernel: str) -> Trace:
    b = gpu_builder(8, 0)
    for step in range(3):
        add_matmul(b, step * 10_000 + 100, [[n], [512, 4096], [4096, n]], "c10::Half", kernel, 900)
    return write(b, tmp_path, f"synthetic_one_matmul_{n}")


def test_the_kernels_alignment_decides_over_the_shapes(tmp_path: Path) -> None:
    # An aligned kernel (align8: 16 bytes of fp16) is fine whatever the shapes look like...
    aligned = "cutlass_80_tensorop_f16_s16816gemm_f16_128x128_32x4_tn_align8"
    assert tensor_core_unfriendly_shape(_one_matmul(tmp_path, 50257, aligned)) == []
    # ...and an align2 kernel is not, even on shapes that are multiples of 8.
    narrow = "cutlass_80_tensorop_f16_s16816gemm_f16_128x128_32x4_tn_align2"
    (finding,) = tensor_core_unfriendly_shape(_one_matmul(tmp_path, 50304, narrow))
    assert finding.evidence["misaligned_shapes"][0]["not_multiple_of_8"] == "kernel align2"


def test_recorded_rgb_stem_conv_in_align8_kernels_is_not_flagged() -> None:
    # ViT patch embedding [4,3,224,224] x [768,3,16,16]: implicit-GEMM K = 3*16*16 = 768, N = 768,
    # and cuDNN ran it in `..._nhwc_align8` tensor-op kernels.
    vit = load_trace(CORPUS / "tl_h100_nsfw_vit_bf16_inference.json.gz")
    assert tensor_core_unfriendly_shape(vit) == []


def test_recorded_attention_bmm_in_align1_kernels_is_flagged() -> None:
    # OWLv2: bmm over sequence length 5185 in cutlass_75_..._align1 kernels, ~230 ms per step.
    (finding,) = tensor_core_unfriendly_shape(
        load_trace(CORPUS / "tl_h100_owlv2_bf16_inference.json.gz")
    )
    (top, *_) = finding.evidence["misaligned_shapes"]
    assert top["op_name"] == "aten::bmm" and "5185" in top["not_multiple_of_8"]
    assert "kernel align1" in top["not_multiple_of_8"]
    assert 200 < finding.evidence["misaligned_gemm_ms_per_step"] < 260


def test_kernels_found_through_external_id_in_an_older_rocm_trace() -> None:
    # Its kernels and launches carry no correlation, only the External id they share.
    gemm = load_trace(CORPUS / "tl_mi300_gemm_misaligned_bf16.json.gz")
    (kernel, *_) = gemm.kernels
    assert kernel.correlation is None and gemm.launcher(kernel).name == "aten::mm"  # type: ignore[union-attr]
    (finding,) = tensor_core_unfriendly_shape(gemm)
    assert 3.0 < finding.evidence["misaligned_gemm_ms_per_step"] < 4.0  # 10 x ~0.37 ms
    assert finding.saving_ms is not None and finding.saving_ms > 0.5
