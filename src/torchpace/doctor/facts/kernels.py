"""Facts about GPU kernels that several rules share: the typical steps' kernels as columns, the
GPU busy share, and which host op launched each matmul/conv kernel.

What a kernel is (class, data type, tensor cores, alignment) comes from the one kernel-name
classifier, `torchpace.trace.kernels`.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Sequence
from itertools import compress

import msgspec

from torchpace.doctor.registry import NotApplicable
from torchpace.trace.events import GpuEvent, HostOp
from torchpace.trace.gpu import KERNEL_CLASSES, gpu_columns
from torchpace.trace.kernels import kernel_info
from torchpace.trace.model import Trace


class KernelColumns(msgspec.Struct, frozen=True):
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
    steps = trace.typical_steps
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


def kernel_columns(trace: Trace, windows: list[tuple[float, float]] | None = None) -> KernelColumns:
    """Kernels of the typical steps as columns; NotApplicable when the trace has no kernels.

    `windows`: the typical steps' device windows (facts.device_steps), where the device lags the
    host; else the kernels starting inside the steps' own ranges. Computed once per trace by
    `Facts.kernels` (torchpace.doctor.facts), where rules read it.
    """
    if not trace.kernels:
        raise NotApplicable(
            "the trace has no GPU kernels (a CPU-only run, or CUDA activity was not recorded)",
            "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
        )
    ranges, steps = typical_window(trace)
    ranges = ranges if windows is None else windows
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
    return KernelColumns(
        index=keep,
        names=tuple(index),
        name_index=name_index,
        klass=tuple(classes),
        ts_us=[device.kernel_starts[i] for i in keep],
        dur_us=[device.kernel_durs[i] for i in keep],
        steps=steps,
    )


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


def gpu_busy_share(trace: Trace, windows: list[tuple[float, float]] | None = None) -> float:
    """The GPU busy share of the median step (1.0 when unknown): how much of a saved GPU ms the
    step gets back (a step that waits on data gains nothing from faster kernels). `windows`: the
    steps' device windows where the device lags the host (its busy share over them)."""
    busy = trace.breakdown.gpu_busy_fraction
    if windows:
        cover = gpu_columns(trace).busy.covered
        busy = sum(cover(lo, hi) for lo, hi in windows) / sum(hi - lo for lo, hi in windows)
    return 1.0 if busy is None else min(max(busy, 0.0), 1.0)


class OpKernels(msgspec.Struct):
    """The matmul/conv kernels one host op launched: their GPU time and narrowest alignment."""

    gpu_ms: float = 0.0
    align: int | None = None  # the smallest `alignN` among its kernels' names; None: unsaid


def kernels_by_op(
    trace: Trace, cols: KernelColumns, wanted: Collection[str], classes: Iterable[str]
) -> dict[int, OpKernels]:
    """The `classes` kernels of the typical steps, keyed by id() of the `wanted` host op that
    launched them (the innermost such op around the launch; ops live as long as the trace)."""
    chosen = set(classes)
    math = [cols.klass[n] in chosen for n in range(len(cols.names))]
    out: dict[int, OpKernels] = {}
    for j, n in enumerate(cols.name_index):
        if not math[n]:
            continue
        kernel = trace.kernels[cols.index[j]]
        op = _wanted_launcher(trace, kernel, wanted)
        if op is None:
            continue
        entry = out.setdefault(id(op), OpKernels())
        entry.gpu_ms += kernel.dur_us / 1e3
        info = kernel_info(kernel.name)
        if info.align is not None and not info.helper:
            entry.align = info.align if entry.align is None else min(entry.align, info.align)
    return out


def _wanted_launcher(trace: Trace, kernel: GpuEvent, wanted: Collection[str]) -> HostOp | None:
    call = trace.runtime_call_of(kernel)
    if call is None:  # no runtime call to go by: the op sharing the kernel's External id
        op = trace.launcher(kernel)
        return op if op is not None and op.name in wanted else None
    for op in trace.enclosing_ops(call.tid, call.ts_us, call.end_us):
        if op.name in wanted:
            return op
    return None
