"""What a kernel name says ran: operation class, library, vendor, data type, tensor cores, arch.

The one kernel-name classifier of torchpace (HTA's `get_kernel_type` is the model): the loader
files each kernel under an operation class with `classify_kernel`, rules and facts ask
`kernel_info` for the rest. Each distinct name is read once (cached): a trace holds hundreds of
distinct names among 10^5 kernels. The naming schemes it reads are in `kernel_names`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Literal

import msgspec

from torchpace.trace import kernel_names as kn
from torchpace.trace.events import KernelClassName
from torchpace.trace.kernel_names import DType, Library, NameFacts, Vendor
from torchpace.trace.names import COMMUNICATION_KERNEL

# How a GEMM/conv/attention kernel computed, for the precision rules: "reduced" (fp16, bf16, fp8,
# int8), "tf32", "fp32", "fp64"; "layout" for helpers around the math; "unknown" when unsaid.
Precision = Literal["reduced", "tf32", "fp32", "fp64", "layout", "unknown"]

# Checked in order: communication first (NCCL kernels mention "reduce"), then attention, copies,
# conv, gemm.
_CLASSES: tuple[tuple[KernelClassName, re.Pattern[str]], ...] = (
    ("communication", COMMUNICATION_KERNEL),
    (
        "attention",
        re.compile(
            r"flash_fwd|flash_bwd|flash::|FlashAttn|fmha|attn_fwd|attn_bwd|mha_fwd|mha_bwd|"
            r"efficient_attention|_sdpa|sdpa_|flex_attention|paged_attention|unified_attention",
            re.I,
        ),
    ),
    ("copy", re.compile(r"copy_kernel|CatArrayBatchedCopy|direct_copy|memcpy|transpose", re.I)),
    (
        "reduction",
        # (triton_kernels' `_finalize_matmul_scatter`: the MoE's weighted sum, not a GEMM)
        re.compile(
            r"bn_fw|bn_bw|batch_?norm|layer_norm|group_norm|rms_norm|triton_(red|per)_|"
            r"finalize_matmul",
            re.I,
        ),
    ),
    (
        "conv",
        re.compile(
            # not "convert" (`vllm::_typeConvert<...>` in a norm kernel's template arguments)
            r"conv(?!ert)|cudnn::|implicit_convolve|winograd|fft2d|fprop|dgrad|wgrad|"
            r"miopen|igemm|xmma_fprop|scudnn",
            re.I,
        ),
    ),
    (
        "gemm",
        re.compile(
            # nvjet_*: cuBLAS's Hopper tensor-core GEMMs (names with no "gemm" in them)
            # not `cutlass::` alone: kernels of other libraries take cutlass::bfloat16_t arguments
            r"(?<!fb)gemm|gemv|matmul|cublas|cutlass(?!::)|nvjet|sm\d+_xmma|"
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
# Inductor names its kernels after the aten ops it fused (`triton_poi_fused_convolution_relu_3`
# is the pointwise tail of a convolution): the prefix decides, not the op names.
_TRITON = re.compile(r"^triton_(poi|red|per|tem)_")
_TRITON_CLASSES: dict[str, KernelClassName] = {
    "poi": "elementwise", "red": "reduction", "per": "reduction",
}  # fmt: skip

# Not the math: layout transforms and helpers cuDNN/cuBLAS/MIOpen launch around a GEMM or conv.
_HELPER = re.compile(
    r"nchwToNhwc|nhwcToNchw|computeOffsets|computeBOffsets|computeWgrad\w*Offsets|splitKreduce|"
    r"splitK_reduce|ReduceSplitK|reduce_wgrad|reduce_1Block_kernel|epilogue::impl|im2col|col2im|"
    r"flip_filter|convertTensor|scalePackedTensor|bn_fw|bn_bw|transpose|fill|memset",
    re.I,
)
_ALIGN = re.compile(r"_align(?:c)?(\d+)(?![0-9])")

# Libraries and vendors of the names the detailed parsers do not claim.
_OWNERS: tuple[tuple[re.Pattern[str], Library, Vendor], ...] = (
    (re.compile(r"nccl|rccl", re.I), "nccl", "any"),
    (re.compile(r"magma_"), "other", "any"),  # MAGMA (torch.linalg), not cuBLAS
    (re.compile(r"^triton_"), "triton", "any"),
    (
        re.compile(
            r"pytorch_flash|flash::|(?<![a-z_])flash_(?:fwd|bwd)|fmha|FlashAttn|attn_fwd|attn_bwd"
        ),
        "flash-attention",
        "any",
    ),
    (
        re.compile(
            r"cudnn|cask_|implicit_convolve|explicit_convolve|fft\dd_|winograd|dgrad_engine|"
            r"wgrad_alg|dgrad2d|flip_filter"
        ),
        "cudnn",
        "nvidia",
    ),
    (
        re.compile(r"cublas|gemv|gemmSN|gemmk1|dot_kernel|splitKreduce|reduce_1Block|epilogue::"),
        "cublas",
        "nvidia",
    ),
    (
        re.compile(r"^(?:batched_transpose_|transpose_[NC]\w+2|SubTensorOp|MIOpen)"),
        "miopen",
        "amd",
    ),
    (re.compile(r"fbgemm|split_embedding|embedding_codegen|bounds_check_indices"), "fbgemm", "any"),
    (re.compile(r"\bcub::|_cub::"), "cub", "any"),
    (re.compile(r"\bat::|at_cuda_detail|\bcunn_|\bc10::"), "aten", "any"),
)
_PARSERS = (
    kn.nvjet, kn.xmma, kn.cutlass, kn.legacy, kn.tensile, kn.miopen, kn.composable_kernel,
    kn.trtllm, kn.triton_kernels,
)  # fmt: skip


class KernelInfo(msgspec.Struct, frozen=True):
    """What a kernel's name says about it; None where the name does not say."""

    op: KernelClassName  # gemm, conv, attention, elementwise, reduction, communication, copy, other
    library: Library
    vendor: Vendor  # "any": a portable library (ATen, Triton, NCCL/RCCL) on either vendor
    dtype: DType | None = None  # the inputs' type ("16bit": fp16 or bf16, the name does not say)
    tensor_cores: bool | None = None  # tensor (NVIDIA) or matrix (AMD) cores
    arch: tuple[int, int] | None = None  # NVIDIA compute capability it was built for
    gfx: str | None = None  # AMD ISA it was built for
    align: int | None = None  # elements per vector access (CUTLASS/cuDNN `alignN`)
    helper: bool = False  # a layout/offset/split-K helper around the math, not the math

    @property
    def precision(self) -> Precision:
        """How the math ran, for the precision rules."""
        if self.helper:
            return "layout"
        if self.dtype in ("fp32", "tf32", "fp64"):
            return self.dtype  # type: ignore[return-value]
        if self.dtype is not None:
            return "reduced"
        return "unknown"


def classify_kernel(name: str) -> KernelClassName:
    """The operation class of a kernel from its (demangled) name; "other" when nothing matches."""
    triton = _TRITON.match(name)
    if triton:
        kind = triton.group(1)
        if kind != "tem":
            return _TRITON_CLASSES[kind]
        return "conv" if "conv" in name else "attention" if "attention" in name else "gemm"
    for klass, pattern in _CLASSES:
        if pattern.search(name):
            return klass
    return "other"


@lru_cache(maxsize=16384)
def kernel_info(name: str) -> KernelInfo:
    """Everything the name says (read once per distinct name)."""
    op = classify_kernel(name)
    facts = _library_facts(name)
    dtype = facts.dtype
    if dtype is None and op != "communication":
        # ATen, cuDNN, flash-attention template arguments; attention kernels' type words
        dtype = kn.cpp_dtype(name) or (kn.token_dtype(name) if op == "attention" else None)
    tensor_cores = facts.tensor_cores
    if tensor_cores is None and op == "attention" and dtype in ("bf16", "fp16", "fp8", "fp4"):
        tensor_cores = True  # flash/memory-efficient attention runs reduced types on MMA units
    align = _ALIGN.search(name)
    return KernelInfo(
        op=op,
        library=facts.library,
        vendor=facts.vendor,
        dtype=dtype,
        tensor_cores=tensor_cores,
        arch=facts.arch or kn.arch_of(name),
        gfx=facts.gfx or kn.gfx_of(name),
        align=int(align.group(1)) if align else None,
        helper=op in ("gemm", "conv") and bool(_HELPER.search(name)),
    )


def _library_facts(name: str) -> NameFacts:
    for parse in _PARSERS:
        facts = parse(name)
        if facts is not None:
            return facts
    for pattern, library, vendor in _OWNERS:
        if pattern.search(name):
            return NameFacts(library, vendor)
    return NameFacts("other", "any")


class KernelDevice(msgspec.Struct, frozen=True):
    """What the kernel names of one trace say about the device that ran them."""

    vendor: Vendor  # "any" when no name is vendor-specific
    compute_capability: tuple[int, int] | None  # at least this (the newest a kernel was built for)
    evidence: str  # the kernel name that says it, for notes and evidence


def device_from_kernels(names: Iterable[str]) -> KernelDevice:
    """The vendor and (lowest possible) architecture of the device, from its kernels' names.

    A kernel built for sm_80 runs on sm_80 and newer GPUs (H100s run `ampere_*` and `sm80_*`
    kernels), so the newest architecture among the names is a lower bound of the device's.
    """
    best: tuple[int, int] | None = None
    evidence = ""
    vendor: Vendor = "any"
    for name in names:
        info = kernel_info(name)
        if info.vendor != "any":
            vendor = info.vendor
        cc = info.arch or _gfx_capability(info.gfx)  # an arch is NVIDIA's, a gfx AMD's
        if cc is not None and (best is None or cc > best):
            best, evidence = cc, name
    return KernelDevice(vendor, best, evidence)


def _gfx_capability(gfx: str | None) -> tuple[int, int] | None:
    """HIP's compute capability of an AMD ISA: gfx942 -> 9.4, gfx90a -> 9.0, gfx1100 -> 11.0."""
    if not gfx:
        return None
    digits = gfx.removeprefix("gfx")
    try:
        return int(digits[:-2]), int(digits[-2], 16)
    except ValueError:
        return None
