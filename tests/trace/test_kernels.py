"""Kernel classes from real kernel names (cuBLAS, cuDNN, CUTLASS, NCCL, ATen, Triton, ROCm)."""

from __future__ import annotations

import pytest

from torchpace.trace.kernels import classify_kernel


@pytest.mark.parametrize(
    ("name", "klass"),
    [
        ("volta_sgemm_128x64_nn", "gemm"),
        ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", "gemm"),
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
            "gemm",
        ),
        ("Cijk_Ailk_Bljk_SB_MT64x64x16_SN_1LDSB0", "gemm"),
        (
            "void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true, false, true>(int)",
            "conv",
        ),
        ("sm86_xmma_fprop_implicit_gemm_indexed_f32f32_tf32f32_f32_nhwckrsc_nhwc", "conv"),
        (
            "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float)",
            "reduction",
        ),
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            "communication",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)",
            "elementwise",
        ),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t>>()",
            "reduction",
        ),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float>(float*)",
            "reduction",
        ),
        ("triton_poi_fused_add_relu_0", "elementwise"),
        ("triton_red_fused_sum_1", "reduction"),
        (
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 3>()",
            "copy",
        ),
        ("nvjet_hsh_192x192_64x3_2x1_v_bz_coopB_NTN", "gemm"),  # Hopper cuBLAS, fp16
        ("nvjet_tst_128x8_64x12_2x1_v_bz_splitK_TNT", "gemm"),  # Hopper cuBLAS, bf16
        ("my_custom_kernel", "other"),
    ],
)
def test_classify(name: str, klass: str) -> None:
    assert classify_kernel(name) == klass
