"""The kernel-name classifier on real kernel names: a table drawn from the recorded traces.

tests/fixtures/kernel_names.json holds real names from tests/fixtures (corpus and shared traces),
each classified by hand from its library's naming scheme (trace/kernel_names.py cites them);
`python -m tests.trace.kernel_names_in_traces` lists every name the fixtures hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kernel_names_in_traces import kernel_names

from torchpace.trace.kernels import classify_kernel, device_from_kernels, kernel_info

TABLE = json.loads((Path(__file__).parents[1] / "fixtures" / "kernel_names.json").read_text())


def _row_id(row: dict[str, Any]) -> str:
    name = row["name"].removeprefix("void ")
    return name.split("(")[0].split("<")[0][:60] + ("/" + row["trace"].split("/")[-1][:12])


@pytest.mark.parametrize("row", TABLE["kernels"], ids=_row_id)
def test_real_names_classified_as_by_hand(row: dict[str, Any]) -> None:
    info = kernel_info(row["name"])
    arch = f"{info.arch[0]}.{info.arch[1]}" if info.arch else None
    got = {
        "op": info.op, "library": info.library, "vendor": info.vendor, "dtype": info.dtype,
        "tensor_cores": info.tensor_cores, "arch": arch, "gfx": info.gfx, "align": info.align,
        "helper": info.helper,
    }  # fmt: skip
    assert got == {k: row[k] for k in got}


def test_every_math_kernel_in_the_fixtures_says_its_data_type() -> None:
    # A GEMM/conv/attention kernel whose type is unknown is invisible to the precision rules.
    # The only one left: AMD's Triton flash-attention (`attn_fwd`) names no type at all.
    unknown = {
        name
        for name in kernel_names()
        if (info := kernel_info(name)).op in ("gemm", "conv", "attention")
        and not info.helper
        and info.dtype is None
        and info.library not in ("fbgemm", "other")
    }
    assert unknown == {"attn_fwd"}


@pytest.mark.parametrize(
    ("name", "dtype", "tensor_cores"),
    [
        # Names from NVIDIA/AMD libraries the fixtures do not hold (their schemes: kernel_names.py).
        ("volta_h884gemm_64x64_ldg8_nn", "fp16", True),
        ("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", "fp16", True),
        ("turing_fp16_s1688gemm_fp16_256x128_ldg8_f2f_tn", "fp16", True),
        ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn", "bf16", True),
        ("ampere_fp16_s16816gemm_fp16_64x64_sliced1x2_ldg8_relu_f2f_stages_64x6_tn", "fp16", True),
        ("cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "fp32", False),
        ("maxwell_scudnn_winograd_128x128_ldg1_ldg4_tile148n_nt", "fp32", False),
        ("volta_dgemm_64x64_nn", "fp64", False),
        ("nvjet_hsh_192x192_64x3_2x1_v_bz_coopB_NTN", "fp16", True),
        ("nvjet_tst_128x256_64x6_2x1_2cta_v_bz_TNT", "bf16", True),
        ("nvjet_sm90_hss_320x128_64x3_2x1_v_bz_NNT", "fp16", True),
        ("nvjet_sss_tf32_128x256_TNT", "tf32", True),
        ("nvjet_qqs_128x128_64x4_1x2_h_bz_TNT", None, True),  # tensor cores; type unsaid
        ("sm86_xmma_fprop_implicit_gemm_indexed_f32f32_tf32f32_f32_nhwckrsc_nhwc", "tf32", True),
        ("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32_stage4", "fp16", True),
        (
            "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x1x1_0_tnn_align8_"
            "warpspecialized_cooperative_epi_tma",
            "bf16",
            True,
        ),
        ("cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x128_32x4_tn_align8", "fp16", True),
        ("cutlass_tensorop_s1688tf32gemm_256x128_16x3_nn_align4", "tf32", True),
        ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_ISA90a", "fp16", True),
        ("Cijk_Ailk_Bljk_SB_MT64x64x16_SN_1LDSB0", "fp32", None),
        ("Cijk_Alik_Bljk_F8B8S_BH_UserArgs_MT128x128x64_MI16x16x1", "fp8", True),
        ("naive_conv_ab_nonpacked_fwd_nchw_half_double_half", "fp16", None),
        ("fmha_cutlassF_f16_aligned_64x64_rf_sm80", "fp16", True),
    ],
)
def test_naming_schemes(name: str, dtype: str | None, tensor_cores: bool | None) -> None:
    info = kernel_info(name)
    assert (info.dtype, info.tensor_cores) == (dtype, tensor_cores)


@pytest.mark.parametrize(
    ("name", "klass"),
    [
        ("my_custom_kernel", "other"),
        # Inductor names kernels after the aten ops they fused: the prefix decides.
        ("triton_poi_fused_convolution_relu_3", "elementwise"),
        ("triton_red_fused_native_layer_norm_1", "reduction"),
        ("triton_per_fused__softmax_2", "reduction"),
        # MIOpen's batch norm (the MI300X norm-layer fixture) is no convolution
        ("MIOpenBatchNormFwdTrainSpatial", "reduction"),
        ("igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1", "conv"),
        ("triton_tem_fused_mm_0", "gemm"),
        ("triton_tem_fused_convolution_4", "conv"),
        ("fmha_cutlassB_bf16_aligned_64x64_k64_sm80", "attention"),
        ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int*)", "other"),
    ],
)
def test_operation_classes(name: str, klass: str) -> None:
    assert classify_kernel(name) == klass


def _names_of(trace: str) -> list[str]:
    return [name for name, (_, _, where) in kernel_names().items() if where.endswith(trace)]


def test_device_read_from_names_when_a_trace_has_no_device_properties() -> None:
    v100 = device_from_kernels(_names_of("kineto_v100_resnet50_autograd_nw4.pt.trace.json.gz"))
    assert (v100.vendor, v100.compute_capability) == ("nvidia", (7, 0))
    assert v100.evidence.startswith(("volta_", "cudnn_infer_volta", "cudnn_train_volta"))
    mi300 = device_from_kernels(_names_of("tl_mi300_gemm_misaligned_bf16.json.gz"))
    assert (mi300.vendor, mi300.compute_capability) == ("amd", (9, 4))  # ISA942: gfx942


def test_device_is_the_newest_architecture_a_kernel_was_built_for() -> None:
    # An H100 runs kernels built for sm_75 and sm_80 beside its own sm_90 ones.
    names = [
        "cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute",
    ]
    assert device_from_kernels(names).compute_capability == (9, 0)
    assert device_from_kernels(["void at::native::foo<float>()"]).compute_capability is None


def test_trace_without_device_properties_says_where_its_capability_comes_from() -> None:
    from torchpace.trace import load_trace

    corpus = Path(__file__).parents[1] / "fixtures" / "corpus"
    info = load_trace(corpus / "kineto_v100_resnet50_autograd_nw4.pt.trace.json.gz").info
    assert (info.compute_capability, info.compute_capability_source) == ((7, 0), "kernel names")
    assert any("read from kernel names" in note for note in info.notes)
    h100 = load_trace(corpus / "tl_h100_nsfw_vit_bf16_inference.json.gz").info
    assert (h100.compute_capability, h100.compute_capability_source) == ((9, 0), "deviceProperties")
