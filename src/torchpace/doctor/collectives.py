"""Collective communication in a trace: when it runs, and how much of it overlaps compute.

On a GPU trace, collectives are the communication kernels (NCCL/RCCL) and compute is every other
kernel. On a CPU trace (gloo), collectives are the `gloo:*`/`nccl:*` record_function ranges the
process group records on its own thread, and compute is the aten ops of the training thread.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from torchpace.doctor.kernel_facts import in_ranges, typical_window
from torchpace.trace import intervals as iv
from torchpace.trace.breakdown import KERNEL_CLASSES, gpu_columns
from torchpace.trace.model import Trace

Floats = npt.NDArray[np.float64]
COMM_RANGE = re.compile(r"^(nccl|gloo|mpi|ucc|rccl|xccl|hccl):[a-z_]+", re.I)


@dataclass(frozen=True)
class CommStats:
    """Per-step medians of collective time, and what the collectives were."""

    source: str  # "kernels" or "host ranges"
    comm_ms: float  # union of collective time per step
    exposed_ms: float  # collective time with no compute running beside it
    largest_ms: float  # the longest single collective per step (the last bucket cannot overlap)
    step_ms: float
    names: dict[str, float]  # collective name -> calls per step

    @property
    def comm_fraction(self) -> float:
        return self.comm_ms / self.step_ms if self.step_ms > 0 else 0.0

    @property
    def overlapped_fraction(self) -> float:
        return 1.0 - self.exposed_ms / self.comm_ms if self.comm_ms > 0 else 0.0


def coverage_at(starts: Floats, ends: Floats, t: Floats) -> Floats:
    """For each time in `t`, how much of the disjoint sorted ranges lies before it."""
    if starts.size == 0:
        return np.zeros(t.shape)
    before = np.concatenate(([0.0], np.cumsum(ends - starts)))
    i = np.searchsorted(starts, t, side="right") - 1
    inside = np.clip(
        np.minimum(t, ends[np.clip(i, 0, None)]) - starts[np.clip(i, 0, None)], 0, None
    )
    return np.where(i >= 0, before[np.clip(i, 0, None)] + inside, 0.0)


def _comm_ranges(trace: Trace) -> tuple[str, Floats, Floats, list[str]] | None:
    if trace.kernels:
        device = gpu_columns(trace)  # cached by the breakdown
        comm = device.kernel_class == KERNEL_CLASSES.index("communication")
        if comm.any():
            s = device.kernel_starts[comm]
            names = [trace.kernels[i].name.split("(")[0] for i in np.flatnonzero(comm).tolist()]
            return "kernels", s, s + device.kernel_durs[comm], names
    ops = [o for o in trace.host_ops if o.kind == "annotation" and COMM_RANGE.match(o.name)]
    if not ops:
        return None
    s = np.fromiter((o.ts_us for o in ops), np.float64, len(ops))
    e = np.fromiter((o.end_us for o in ops), np.float64, len(ops))
    return "host ranges", s, e, [o.name for o in ops]


def _compute_ranges(trace: Trace, source: str) -> tuple[Floats, Floats]:
    if source == "kernels":
        device = gpu_columns(trace)
        work = device.kernel_class != KERNEL_CLASSES.index("communication")
        s = device.kernel_starts[work]
        e = s + device.kernel_durs[work]
    else:
        ops = [o for o in trace.host_ops if o.kind == "op" and o.tid == trace.main_tid]
        s = np.fromiter((o.ts_us for o in ops), np.float64, len(ops))
        e = np.fromiter((o.end_us for o in ops), np.float64, len(ops))
    return iv.union_arrays(s, e)


def comm_stats(trace: Trace) -> CommStats | None:
    """Collective time per step and its overlap with compute; None when there are none (cached)."""
    key = "rules:comm_stats"
    if key in trace._cache:
        return trace._cache[key]  # type: ignore[return-value]
    found = _comm_ranges(trace)
    stats = None if found is None else _stats(trace, *found)
    trace._cache[key] = stats
    return stats


def _stats(trace: Trace, source: str, s: Floats, e: Floats, names: list[str]) -> CommStats | None:
    ranges, steps = typical_window(trace)
    keep = in_ranges(s, ranges)
    if not keep.any():
        return None
    cs, ce = iv.union_arrays(s[keep], e[keep])
    ws, we = _compute_ranges(trace, source)
    one_s, one_e = s[keep], e[keep]  # single collectives, for the longest one per step
    per_step: list[tuple[float, float, float]] = []
    for lo, hi in ranges:
        a, b = np.searchsorted(cs, [lo, hi])
        s0, e0 = cs[a:b], np.minimum(ce[a:b], hi)
        total = float((e0 - s0).sum())
        # Collective time with compute beside it: the compute coverage inside each comm range.
        both = float((coverage_at(ws, we, e0) - coverage_at(ws, we, s0)).sum())
        inside = (one_s >= lo) & (one_s <= hi)
        longest = float((np.minimum(one_e[inside], hi) - one_s[inside]).max(initial=0.0))
        per_step.append((total, total - both, longest))
    counts = Counter(n for n, k in zip(names, keep, strict=True) if k)
    return CommStats(
        source=source,
        comm_ms=statistics.median(p[0] for p in per_step) / 1e3,
        exposed_ms=statistics.median(p[1] for p in per_step) / 1e3,
        largest_ms=statistics.median(p[2] for p in per_step) / 1e3,
        step_ms=trace.breakdown.median_step_ms,
        names={n: round(c / steps, 1) for n, c in counts.most_common(6)},
    )
