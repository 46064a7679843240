"""Kernel classes from kernel names (cuBLAS/cuDNN/CUTLASS/NCCL/RCCL/ATen naming conventions)."""

from __future__ import annotations

import re

from torchpace.trace.events import KernelClassName

# Checked in order: communication first (NCCL kernels mention "reduce"), then copies, conv, gemm.
_CLASSES: tuple[tuple[KernelClassName, re.Pattern[str]], ...] = (
    (
        "communication",
        re.compile(r"nccl|rccl|gloo|allreduce|all_reduce|allgather|reducescatter", re.I),
    ),
    ("copy", re.compile(r"copy_kernel|CatArrayBatchedCopy|direct_copy|memcpy|transpose", re.I)),
    (
        "reduction",
        re.compile(r"bn_fw|bn_bw|batch_norm|layer_norm|group_norm|triton_(red|per)_", re.I),
    ),
    (
        "conv",
        re.compile(
            r"conv|cudnn::|implicit_convolve|winograd|fft2d|fprop|dgrad|wgrad|"
            r"miopen|igemm|xmma_fprop|scudnn",
            re.I,
        ),
    ),
    (
        "gemm",
        re.compile(
            # nvjet_*: cuBLAS's Hopper tensor-core GEMMs (names with no "gemm" in them)
            r"gemm|gemv|matmul|cublas|cutlass|nvjet|sm\d+_xmma|"
            r"ampere_\w*(sgemm|hgemm|s1688|h1688|s16816)|"
            r"volta_\w*(sgemm|hgemm|884)|turing_|Cijk_|bmm|dot_kernel|splitKreduce|Tensile",
            re.I,
        ),
    ),
    (
        "reduction",
        re.compile(
            r"reduce|softmax|norm|sum_kernel|mean|argmax|argmin|max_kernel|min_kernel|"
            r"cross_entropy|nll_loss|cumsum|scan|topk|sort",
            re.I,
        ),
    ),
    (
        "elementwise",
        re.compile(
            r"elementwise|vectorized|unrolled|pointwise|triton_poi|fused_|FillFunctor|"
            r"index|gather|scatter|where|dropout|relu|gelu|silu|sigmoid|tanh|add|mul|"
            r"activation|embedding|pool|upsample|adam|sgd|foreach|multi_tensor",
            re.I,
        ),
    ),
)


def classify_kernel(name: str) -> KernelClassName:
    """The class of a kernel from its (demangled) name; "other" when nothing matches."""
    for klass, pattern in _CLASSES:
        if pattern.search(name):
            return klass
    return "other"
