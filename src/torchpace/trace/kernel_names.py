"""How each GPU library names its kernels: one parser per naming scheme, used by trace.kernels.

A parser reads what a name says and leaves the rest unknown (None): data type of the inputs,
whether tensor (matrix) cores run the math, the architecture it was built for, its alignment.
Naming schemes, with where each is documented (see also docs/trace.md, "Kernel names"):

- cuBLAS (legacy): `<arch>_[<in>_]<acc><shape>gemm_[<out>_]...`: `volta_sgemm_128x64_nn` (fp32,
  CUDA cores), `volta_h884gemm_*` (fp16, tensor cores), `ampere_bf16_s16816gemm_bf16_*` (bf16 in,
  fp32 accumulate); cuDNN's `<arch>_scudnn_*` follows it. The arch prefix is what it was built for.
- cuBLASLt / cuDNN runtime kernels: `sm80_xmma_gemm_bf16bf16_bf16f32_f32_*`,
  `sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_*`: A/B types, then C/accumulator types.
- cuBLAS on Hopper: `nvjet_[sm90_]<in><compute><out>[_tf32]_*` (`nvjet_tst_*` bf16, `nvjet_hsh_*`
  fp16, `nvjet_sss_tf32_*`): warpgroup (wgmma) tensor-core kernels.
- CUTLASS 2.x (`cutlass/python/cutlass_library`, core_name/extended_name):
  `cutlass_<sm>_<opclass>_[<C type>_]<acc letter><inst shape>[<intermediate>]<kind>_[<A type>_]..._align<N>`,
  e.g. `cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1`; cuDNN embeds the same names
  (`cutlass_tensorop_bf16_s16816fprop_optimized_bf16_*_nhwc_align8`). CUTLASS 3.x:
  `cutlass3x_sm90_tensorop_gemm_<A>_<B>_<acc>_<C>_<D>_*_align<N>`.
- Tensile (rocBLAS and hipBLASLt on ROCm): `Cijk_<A layout>_<B layout>_<types>_..._MI<mfma>_..._ISA<gfx>`;
  the types token starts with the input type: `SB` (fp32, beta), `HHS_BH` (fp16 in and out, fp32
  compute, high-precision accumulate), `BBS_BH` (bf16), hipBLASLt's `B_BS_BH` (bf16). `MI...` is
  an MFMA (matrix core) instruction shape.
- MIOpen: `igemm_<fwd|bwd|wrw>_gtc[x<n>]_<layout>_<type>_*` (`gtcx`: XDLOPS matrix cores),
  `naive_conv_*_<layout>_<type>_*`; Composable Kernel: `ck::tensor_operation::device::kernel_*_xdl_*`
  (mangled `_ZN2ck16tensor_operation...`, `t` = ck::bhalf_t, `DF16_` = half).
- Triton (torch.compile/Inductor): `triton_<poi|red|per|tem>_fused_*`: pointwise, reduction,
  persistent reduction, template (GEMM/conv); the name does not say the data type. OpenAI's
  triton_kernels MoE GEMM (vLLM, gpt-oss): `_matmul_ogs_<layouts>_<A>x<B>x<W>_<tile>` with the
  activation and weight types (`bf16xbf16xmxfp4`).
- TensorRT-LLM's generated Blackwell/Hopper kernels (trtllm-gen, used by vLLM and FlashInfer):
  batched GEMMs `bmm_<C>_<A><B>_<acc>_t<tile>..._sm100f` (`bmm_Bfloat16_MxE2m1MxE4m3_Fp32_*`:
  MXFP4 x MXFP8 in, bf16 out) and attention `fmhaSm100aKernel_Qkv<type>O<type>H<head dim>*`.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

DType = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "16bit", "fp8", "fp4", "int8"]
Library = Literal[
    "cublas", "cudnn", "cutlass", "triton", "tensile", "ck", "miopen", "flash-attention",
    "trtllm", "nccl", "aten", "cub", "fbgemm", "other",
]  # fmt: skip
Vendor = Literal["nvidia", "amd", "any"]


class NameFacts(msgspec.Struct, frozen=True):
    """What one naming scheme reads from a name; None where the name does not say."""

    library: Library
    vendor: Vendor
    dtype: DType | None = None
    tensor_cores: bool | None = None
    arch: tuple[int, int] | None = None  # NVIDIA compute capability the kernel was built for
    gfx: str | None = None  # AMD ISA, e.g. "gfx942"


# --- data types written as words, letters and C++ types --------------------------------------

_WORDS: dict[str, DType] = {
    "fp64": "fp64", "f64": "fp64", "double": "fp64", "d": "fp64",
    "fp32": "fp32", "f32": "fp32", "float": "fp32", "s": "fp32",
    "tf32": "tf32", "xf32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16", "ushort": "bf16",  # MIOpen's bf16 is ushort
    "fp16": "fp16", "f16": "fp16", "half": "fp16", "h": "fp16",
    "e4m3": "fp8", "e5m2": "fp8", "fp8": "fp8", "f8": "fp8", "mxfp8": "fp8",
    "e2m1": "fp4", "fp4": "fp4", "mxfp4": "fp4", "nvfp4": "fp4",
    "int8": "int8", "i8": "int8", "s8": "int8", "u8": "int8", "i": "int8",
}  # fmt: skip
# C++ template arguments (ATen, cuDNN, CUTLASS, flash-attention): the first one is the data type.
# (A letter before it is part of another word; digits and `::` are mangling and namespaces.)
_CPP_TYPE = re.compile(
    r"(?<![A-Za-z])(tfloat32_t|double|float|Half|__half|half_t|BFloat16|__nv_bfloat16|bfloat16_t|"
    r"__hip_bfloat16|hip_bfloat16|Float8_e4m3fn\w*|Float8_e5m2\w*|__nv_fp8_e4m3|__nv_fp8_e5m2|"
    r"float_e4m3_t|float_e5m2_t)(?![a-z0-9_])"
)
_CPP_DTYPES: dict[str, DType] = {
    "double": "fp64", "float": "fp32", "Half": "fp16", "__half": "fp16", "half_t": "fp16",
    "BFloat16": "bf16", "__nv_bfloat16": "bf16", "bfloat16_t": "bf16", "tfloat32_t": "tf32",
    "__hip_bfloat16": "bf16", "hip_bfloat16": "bf16",
}  # fmt: skip
_TYPE_TOKEN = re.compile(r"(?:^|_)(bf16|fp16|f16|fp32|f32|fp8|e4m3|e5m2)(?=_|$)")


def cpp_dtype(name: str) -> DType | None:
    """The first C++ data type among a name's template arguments (`<float, ...>`), if any."""
    found = _CPP_TYPE.search(name)
    if found is None:
        return None
    word = found.group(1)
    return _CPP_DTYPES.get(word, "fp8" if "8" in word else None)


def token_dtype(name: str) -> DType | None:
    """A data type written as a word between underscores (`fmha_cutlassF_f16_aligned_*`)."""
    return _strongest(_TYPE_TOKEN.findall(name))


def _strongest(types: list[str]) -> DType | None:
    """The input type among several type words: a reduced or TF32 type wins over fp32 (the
    accumulator and epilogue are fp32 in mixed-precision kernels)."""
    found = [_WORDS[t] for t in types if t in _WORDS]
    order: tuple[DType, ...] = ("tf32", "fp4", "fp8", "int8", "bf16", "fp16", "fp64", "fp32")
    return next((dtype for dtype in order if dtype in found), None)


# --- architecture ---------------------------------------------------------------------------

# Named families: the compute capability of the first GPU of each (a kernel built for it runs on
# that GPU and newer ones: a lower bound of the device's).
ARCH_NAMES: dict[str, tuple[int, int]] = {
    "kepler": (3, 0), "maxwell": (5, 0), "pascal": (6, 0), "volta": (7, 0), "turing": (7, 5),
    "ampere": (8, 0), "ada": (8, 9), "hopper": (9, 0), "blackwell": (10, 0),
}  # fmt: skip
_ARCH_WORD = re.compile(r"(?:^|[^a-z])(kepler|maxwell|pascal|volta|turing|ampere|hopper)_")
_SM = re.compile(
    r"(?:^|[^a-z0-9])(?:sm_?|cutlass_|cutlass3x_sm)(\d)(\d)(\d?)[a-z]?(?=_|$|[^a-z0-9])"
)
_GFX = re.compile(r"(?:ISA|gfx)(\d{2,3}[0-9a-f])(?![0-9a-z])")


def arch_of(name: str) -> tuple[int, int] | None:
    """The NVIDIA compute capability a kernel name says it was built for, or None."""
    found = _SM.search(name)
    if found:
        a, b, c = found.groups()
        return (int(a + b), int(c)) if c else (int(a), int(b))  # sm100 -> (10, 0)
    word = _ARCH_WORD.search(name)
    if word:
        return ARCH_NAMES[word.group(1)]
    if name.startswith("nvjet"):
        return (9, 0)  # cuBLAS's warpgroup (wgmma) GEMMs exist from Hopper on
    return None


def gfx_of(name: str) -> str | None:
    """The AMD ISA a kernel name says it was built for (Tensile's `ISA942` -> "gfx942")."""
    found = _GFX.search(name)
    return f"gfx{found.group(1)}" if found else None


# --- NVIDIA: cuBLAS, cuDNN, CUTLASS -----------------------------------------------------------

# `<arch>_[<in>_]<acc letters><shape>[tf32]<gemm|cudnn>`: volta_sgemm, volta_fp16_s884gemm_fp16,
# turing_fp16_s1688cudnn_fp16, ampere_scudnn_winograd, volta_cgemm (complex fp32), volta_gcgemm.
_LEGACY = re.compile(
    r"(?:^|_)(?:maxwell|pascal|volta|turing|ampere|hopper)_(?:(fp16|bf16|tf32|int8|i8|fp8)_)?"
    r"g?([shdczi])(\d{3,6})?(tf32)?(?:gemm|cudnn|gemv)"
)
_COMPLEX: dict[str, DType] = {"c": "fp32", "z": "fp64"}


def legacy(name: str) -> NameFacts | None:
    """cuBLAS/cuDNN kernels named `<arch>_..._<acc><shape>gemm` (Maxwell to Ampere libraries)."""
    found = _LEGACY.search(name)
    if found is None:
        return None
    prefix, acc, shape, mid = found.groups()
    library: Library = "cudnn" if "cudnn" in name else "cublas"
    arch = arch_of(name)
    dtype: DType | None
    if shape is None:  # no MMA instruction shape: CUDA cores (SIMT)
        dtype = _WORDS[prefix] if prefix else _COMPLEX.get(acc) or _WORDS.get(acc, "fp32")
        return NameFacts(library, "nvidia", dtype, False, arch)
    if prefix or mid:
        dtype = _WORDS[prefix or mid]
    elif acc == "h":
        dtype = "fp16"
    elif acc == "i":
        dtype = "int8"
    elif shape == "1688" and arch is not None and arch >= (8, 0):
        dtype = "tf32"  # fp32 data through 16x8x8 tensor cores: TF32 (Ampere and newer)
    else:
        dtype = "16bit" if shape in ("884", "1688", "16816") else None  # fp16 or bf16 inputs
    return NameFacts(library, "nvidia", dtype, True, arch)


_XMMA_TYPES = re.compile(
    r"xmma\w*?_((?:tf32|bf16|f16|f32|f64|i8|s8|e4m3|e5m2)+)_((?:tf32|bf16|f16|f32|f64|i8|i32|s8|e4m3|e5m2)+)_"
)
_TYPE_WORDS = re.compile(r"tf32|bf16|f16|f32|f64|i8|i32|s8|e4m3|e5m2")


def xmma(name: str) -> NameFacts | None:
    """cuBLASLt/cuDNN runtime kernels: `sm80_xmma_<op>_<A><B>_<C><acc>_<epilogue>_...`."""
    found = _XMMA_TYPES.search(name)
    if found is None:
        return None
    words = _TYPE_WORDS.findall(found.group(1) + found.group(2))
    dtype = _strongest(words)
    library: Library = (
        "cudnn" if ("cudnn" in name or "fprop" in name or "grad" in name) else "cublas"
    )
    return NameFacts(library, "nvidia", dtype, dtype not in ("fp32", "fp64"), arch_of(name))


_NVJET = re.compile(r"^nvjet_(?:sm\d+_)?([a-z])([a-z])([a-z])(_tf32)?")
_NVJET_IN: dict[str, DType] = {"h": "fp16", "t": "bf16", "s": "tf32"}


def nvjet(name: str) -> NameFacts | None:
    """cuBLAS's Hopper GEMMs: `nvjet_<in><compute><out>_...` (h fp16, t bf16, s fp32 as TF32)."""
    found = _NVJET.match(name)
    if found is None:
        return None
    dtype = "tf32" if found.group(4) else _NVJET_IN.get(found.group(1))
    return NameFacts("cublas", "nvidia", dtype, True, arch_of(name))


_CUTLASS = re.compile(
    r"cutlass(?:3x)?_(?:\d+_|sm\d+_)?(?:\w+_)?(tensorop|wmma_tensorop|simt)_(\w+)"
)
_CUTLASS_CORE = re.compile(
    r"(?:^|_)([shdcz])(\d{3,6})?(tf32)?(?:gemm|fprop|dgrad|wgrad|deconv|conv)"
)
_CUTLASS_TYPES = re.compile(r"(?:^|_)(tf32|bf16|f16|f32|f64|e4m3|e5m2|s8|u8|i8)(?=_|$)")


def cutlass(name: str) -> NameFacts | None:
    """CUTLASS kernels (also inside cuBLAS/cuDNN): `cutlass_80_tensorop_bf16_s16816gemm_bf16_..`."""
    found = _CUTLASS.search(name)
    if found is None:
        return None
    opclass, rest = found.groups()
    tensor_cores = opclass != "simt"
    dtype = _strongest(_CUTLASS_TYPES.findall(rest))
    core = _CUTLASS_CORE.search(rest)
    if dtype in (None, "fp32") and core:
        acc, shape, mid = core.groups()
        if mid or (tensor_cores and shape == "1688" and acc == "s"):
            dtype = "tf32"  # fp32 data on 16x8x8 tensor cores runs as TF32
        elif dtype is None:
            dtype = _COMPLEX.get(acc) or _WORDS.get(acc)  # type: ignore[assignment]
    library: Library = "cudnn" if "cudnn" in name else "cutlass"
    return NameFacts(library, "nvidia", dtype, tensor_cores, arch_of(name))


# --- AMD: Tensile (rocBLAS, hipBLASLt), MIOpen, Composable Kernel ----------------------------

_TENSILE = re.compile(r"Cijk_A[a-z]+_B[a-z]+_([A-Z0-9][A-Za-z0-9]*)")
_TENSILE_IN: dict[str, DType] = {
    "S": "fp32", "D": "fp64", "C": "fp32", "Z": "fp64", "H": "fp16", "B": "bf16", "X": "tf32",
    "I8": "int8", "I": "int8", "4xi8": "int8", "F8": "fp8", "B8": "fp8", "F8B8": "fp8", "B8F8": "fp8",
}  # fmt: skip


def tensile(name: str) -> NameFacts | None:
    """Tensile GEMMs of rocBLAS and hipBLASLt: `Cijk_Ailk_Bljk_BBS_BH_..._MI16x16x16x1_...`."""
    found = _TENSILE.search(name)
    if found is None:
        return None
    token = found.group(1)
    dtype = _TENSILE_IN.get(token[:4]) or _TENSILE_IN.get(token[:2]) or _TENSILE_IN.get(token[0])
    matrix = True if re.search(r"_MI\d+x\d+", name) else None  # MFMA instruction: matrix cores
    return NameFacts("tensile", "amd", dtype, matrix, gfx=gfx_of(name))


_MIOPEN_TYPE = re.compile(r"_(fp32|fp16|bf16|int8|float|half|ushort|bfloat16|double)(?=_|$)")


def miopen(name: str) -> NameFacts | None:
    """MIOpen convolutions: `igemm_fwd_gtcx3_nhwc_bf16_*` (XDLOPS), `naive_conv_fwd_nchw_half_*`."""
    if not name.startswith(("igemm_", "naive_conv", "MIOpen", "miopen", "gridwise_convolution")):
        return None
    found = _MIOPEN_TYPE.search(name)
    dtype = _WORDS.get(found.group(1)) if found else None
    xdlops = bool(re.match(r"igemm_\w+?_gtcx", name)) or "xdlops" in name
    return NameFacts("miopen", "amd", dtype, True if xdlops else None)


_CK_BF16 = re.compile(r"(?:[EI]|S\w{0,3}_)t+f")
_CK_FP16 = re.compile(r"(?:[EI]|S\w{0,3}_)(?:DF16_)+f")


def composable_kernel(name: str) -> NameFacts | None:
    """Composable Kernel: `ck::tensor_operation::device::kernel_gemm_xdl_cshuffle_v3<...>`."""
    if not (name.startswith("_ZN2ck") or "ck::" in name or "ck_tile::" in name):
        return None
    dtype: DType | None = None
    if "ck::bhalf_t" in name or _CK_BF16.search(name):
        dtype = "bf16"  # ck::bhalf_t is an unsigned short: `t` in mangled template arguments
    elif "ck::half_t" in name or _CK_FP16.search(name):
        dtype = "fp16"
    matrix = True if re.search(r"xdl|wmma|mfma", name, re.I) else None
    return NameFacts("ck", "amd", dtype, matrix)


# --- TensorRT-LLM generated kernels, OpenAI triton_kernels ------------------------------------

# trtllm-gen type words: E4m3/E5m2 fp8, E2m1 fp4, an `Mx` prefix for the block-scaled (MX) form.
_TRT_TYPE = re.compile(r"(?:Mx)?(E4m3|E5m2|E2m1|Bfloat16|Fp16|Fp32|Int8)")
_TRT_WORDS: dict[str, DType] = {
    "E4m3": "fp8", "E5m2": "fp8", "E2m1": "fp4", "Bfloat16": "bf16", "Fp16": "fp16",
    "Fp32": "fp32", "Int8": "int8",
}  # fmt: skip
_TRT_BMM = re.compile(
    r"^bmm_(\w+?)_((?:(?:Mx)?(?:E\dm\d|Bfloat16|Fp16|Fp32|Int8)){2})_(?:Fp32|Fp16)_t\d"
)
_TRT_FMHA = re.compile(r"^fmhaSm(\d)(\d)(\d?)[a-z]?Kernel_Qkv([A-Za-z0-9]+?)O([A-Za-z0-9]+?)H\d")


def trtllm(name: str) -> NameFacts | None:
    """trtllm-gen GEMMs (`bmm_<C>_<A><B>_<acc>_t...`) and attention (`fmhaSm100aKernel_Qkv...`)."""
    bmm = _TRT_BMM.match(name)
    if bmm:
        words = [_TRT_WORDS[t] for t in _TRT_TYPE.findall(bmm.group(2))]
        return NameFacts("trtllm", "nvidia", _strongest_dtype(words), True, arch_of(name))
    fmha = _TRT_FMHA.match(name)
    if fmha:
        a, b, c, qkv, _ = fmha.groups()
        words = [_TRT_WORDS[t] for t in _TRT_TYPE.findall(qkv)]
        arch = (int(a + b), int(c)) if c else (int(a), int(b))
        return NameFacts("trtllm", "nvidia", _strongest_dtype(words), True, arch)
    return None


_OGS = re.compile(r"^_matmul_ogs_[A-Z]+_([a-z0-9]+)x([a-z0-9]+)x([a-z0-9]+)_")


def triton_kernels(name: str) -> NameFacts | None:
    """triton_kernels' MoE GEMM: `_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1[_swiglu]`."""
    found = _OGS.match(name)
    if found is None:
        return None
    dtype = _strongest(list(found.groups()))
    return NameFacts("triton", "any", dtype, dtype not in (None, "fp32", "fp64") or None)


def _strongest_dtype(types: list[DType]) -> DType | None:
    order: tuple[DType, ...] = ("tf32", "fp4", "fp8", "int8", "bf16", "fp16", "fp64", "fp32")
    return next((dtype for dtype in order if dtype in types), None)
