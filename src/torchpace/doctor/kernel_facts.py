"""Facts about GPU kernels that several rules share: numeric precision from kernel names, columns.

Kernel names say how the math ran. cuBLAS/cuDNN/CUTLASS name the instruction shape and types:
`volta_sgemm_*`, `*_scudnn_*`, `implicit_convolve_sgemm`, `cutlass_*_simt_sgemm` run fp32 on CUDA
cores; `*884*` (Volta), `*1688*`/`*16816*` with fp16/bf16, `*_hmma*`, `*tensorop*_h*` run on
tensor cores in reduced precision; `*tf32*` and CUTLASS `tensorop_s1688gemm` run fp32 data as TF32
on tensor cores (Ampere+). ROCm Tensile kernels (`Cijk_*`) carry the data type after the layout:
`_SB_` single, `_HB_`/`_HHS_` half, `_BBS_` bf16. cuBLAS's Hopper GEMMs (`nvjet_*`, warpgroup
tensor-core kernels) name the input type first: `nvjet_hsh_*` fp16, `nvjet_tst_*` bf16; any other
nvjet kernel runs on tensor cores in a precision its name does not say ("unknown").
"""

from __future__ import annotations

import itertools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import compress
from typing import Literal

from torchpace.doctor.registry import NotApplicable
from torchpace.trace.breakdown import KERNEL_CLASSES, gpu_columns
from torchpace.trace.events import HostOp
from torchpace.trace.model import Trace

Precision = Literal["reduced", "tf32", "fp32", "fp64", "layout", "unknown"]

# Not math: layout transforms and helpers that cuDNN/cuBLAS launch around a GEMM or convolution.
_LAYOUT = re.compile(
    r"nchwToNhwc|nhwcToNchw|computeOffsets|splitKreduce|splitK_reduce|ReduceSplitK|reduce_wgrad|"
    r"im2col|col2im|"
    r"convertTensor|scalePackedTensor|bn_fw|bn_bw|transpose|fill|memset",
    re.I,
)
_FP64 = re.compile(r"dgemm|\bdouble\b|<double|fp64|f64f64|_d884|dmma", re.I)
_REDUCED = re.compile(
    r"fp16|f16|bf16|bfloat16|\bhalf\b|__half|c10::Half|h884|h1688|h16816|s884|hmma|imma|i8816|"
    r"int8|e4m3|e5m2|fp8|_hgemm|hgemm|wmma|flash_fwd|flash_bwd|fmha|nvjet_(sm\d+_)?[ht]s|"
    r"Cijk_\w*?_(HB|HHS|HSS|BBS|BSS|BB|HH)_",
    re.I,
)
_TF32 = re.compile(r"tf32|s1688gemm|s16816gemm|s1688|xf32", re.I)
_FP32 = re.compile(
    r"sgemm|scudnn|simt|gemmSN|gemmk1|gemv2T_kernel_val<int, int, float|<float|f32f32_f32f32|"
    r"implicit_convolve_sgemm|explicit_convolve_sgemm|winograd|fft2d_|Cijk_\w*?_S(B)?_",
    re.I,
)


@lru_cache(maxsize=8192)
def kernel_precision(name: str) -> Precision:
    """How a GEMM/convolution kernel computed, from its name ("unknown" when it does not say)."""
    if _LAYOUT.search(name):
        return "layout"
    if _FP64.search(name):
        return "fp64"
    if _REDUCED.search(name):
        return "reduced"
    if _TF32.search(name):
        return "tf32"
    if _FP32.search(name):
        return "fp32"
    return "unknown"


@dataclass(frozen=True)
class KernelColumns:
    """The trace's kernels as columns (sorted by start), restricted to its typical steps."""

    index: list[int]  # positions in trace.kernels
    names: tuple[str, ...]  # distinct kernel names
    name_index: list[int]  # per kernel, an index into `names`
    klass: tuple[str, ...]  # per distinct name: gemm, conv, elementwise, ..., communication
    ts_us: list[float]
    dur_us: list[float]
    steps: int  # typical steps the kernels were taken from (1 for a trace without steps)


def typical_window(trace: Trace) -> tuple[list[tuple[float, float]], int]:
    """The typical steps as (start_us, end_us) ranges, and how many there are."""
    steps = trace.typical_steps or list(trace.steps)
    return [(s.ts_us, s.end_us) for s in steps], max(1, len(steps))


def in_ranges(
    ts: Iterable[float], ranges: list[tuple[float, float]], *, ordered: bool = False
) -> list[bool]:
    """Which timestamps fall inside one of the sorted, disjoint ranges (ends included).

    `ordered`: the caller knows `ts` is sorted (kernel starts, busy ranges); else it is checked.
    """
    times = ts if isinstance(ts, list) else list(ts)
    if not ranges:
        return [True] * len(times)
    if ordered or all(a <= b for a, b in itertools.pairwise(times)):
        # Sorted times: mark one slice per range, in C.
        out = [False] * len(times)
        for lo, hi in ranges:
            i, j = bisect_left(times, lo), bisect_right(times, hi)
            out[i:j] = [True] * (j - i)
        return out
    starts = [r[0] for r in ranges]
    ends = [r[1] for r in ranges]
    out = []
    for t in times:
        i = bisect_right(starts, t) - 1
        out.append(i >= 0 and t <= ends[i])
    return out


def kernel_columns(trace: Trace) -> KernelColumns:
    """Kernels of the typical steps as columns; NotApplicable when the trace has no kernels."""
    cached = trace._cache.get("rules:kernel_columns")
    if isinstance(cached, KernelColumns):
        return cached
    if not trace.kernels:
        raise NotApplicable(
            "the trace has no GPU kernels (a CPU-only run, or CUDA activity was not recorded)",
            "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
        )
    ranges, steps = typical_window(trace)
    device = gpu_columns(trace)  # cached by the breakdown: kernels' starts, durations, classes
    keep = list(
        compress(range(len(trace.kernels)), in_ranges(device.kernel_starts, ranges, ordered=True))
    )
    index: dict[str, int] = {}
    classes: list[str] = []
    kernels = trace.kernels
    name_index = []
    for i in keep:
        name = kernels[i].name
        n = index.get(name)
        if n is None:  # the first kernel of this name gives the class of every one
            n = index[name] = len(index)
            classes.append(KERNEL_CLASSES[device.kernel_class[i]])
        name_index.append(n)
    cols = KernelColumns(
        index=keep,
        names=tuple(index),
        name_index=name_index,
        klass=tuple(classes),
        ts_us=[device.kernel_starts[i] for i in keep],
        dur_us=[device.kernel_durs[i] for i in keep],
        steps=steps,
    )
    trace._cache["rules:kernel_columns"] = cols
    return cols


def per_name_ms(cols: KernelColumns, mask: Sequence[bool] | None = None) -> list[float]:
    """Total kernel milliseconds per distinct name (optionally only kernels in `mask`)."""
    us = [0.0] * len(cols.names)
    for k, (n, dur) in enumerate(zip(cols.name_index, cols.dur_us, strict=True)):
        if mask is None or mask[k]:
            us[n] += dur
    return [v / 1e3 for v in us]


def per_name_count(cols: KernelColumns) -> list[int]:
    """How many times each distinct kernel name ran."""
    counts = [0] * len(cols.names)
    for n in cols.name_index:
        counts[n] += 1
    return counts


def short_name(name: str, limit: int = 90) -> str:
    """A kernel name without its argument list, cut to `limit` characters."""
    head = name.split("(", 1)[0] if not name.startswith("void ") else name[5:].split("(", 1)[0]
    return head if len(head) <= limit else head[: limit - 3] + "..."


def launching_op(trace: Trace, tid: int, ts_us: float, end_us: float) -> HostOp | None:
    """The innermost aten op on thread `tid` around a runtime call [ts_us, end_us], or None.

    A binary search on the (start-sorted) host ops, then a short walk back: cheaper than
    Trace.launcher's full nesting when a rule needs the launchers of only a few kernels.
    """
    ops = trace.host_ops
    first = bisect_right(ops, ts_us, key=lambda o: o.ts_us) - 1
    for i in range(first, max(-1, first - 5000), -1):
        op = ops[i]
        if op.tid == tid and op.kind == "op" and op.end_us >= end_us:
            return op  # the latest-starting op on the thread that encloses the call: the innermost
    return None
