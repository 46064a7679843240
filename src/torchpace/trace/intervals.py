"""Interval arithmetic on [start, end) ranges in microseconds: unions, clipping, subtraction."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

Interval = tuple[float, float]
Floats = npt.NDArray[np.float64]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Merge overlapping ranges into disjoint sorted ones."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def clip(intervals: Iterable[Interval], lo: float, hi: float) -> list[Interval]:
    """Ranges cut to [lo, hi); empty pieces dropped."""
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts of disjoint sorted `a` not covered by disjoint sorted `b`."""
    out: list[Interval] = []
    j = 0
    for start, end in a:
        cur = start
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < end:
            out.append((cur, end))
    return out


def total(intervals: Iterable[Interval]) -> float:
    """Summed length of (disjoint) ranges."""
    return sum(e - s for s, e in intervals)


def union_arrays(starts: Floats, ends: Floats) -> tuple[Floats, Floats]:
    """Vectorised union of many ranges: disjoint sorted (starts, ends) arrays."""
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    # A new merged range begins where a start lies after every earlier end.
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], e[last]


def covered(starts: Floats, ends: Floats, lo: float, hi: float) -> float:
    """Time within [lo, hi) covered by disjoint sorted ranges (from union_arrays)."""
    i = int(np.searchsorted(ends, lo, side="right"))
    j = int(np.searchsorted(starts, hi, side="left"))
    if j <= i:
        return 0.0
    s = np.maximum(starts[i:j], lo)
    e = np.minimum(ends[i:j], hi)
    return float(np.clip(e - s, 0.0, None).sum())


def gaps(starts: Floats, ends: Floats, lo: float, hi: float) -> list[Interval]:
    """The parts of [lo, hi) not covered by disjoint sorted ranges (idle windows)."""
    i = int(np.searchsorted(ends, lo, side="right"))
    j = int(np.searchsorted(starts, hi, side="left"))
    busy = [(float(s), float(e)) for s, e in zip(starts[i:j], ends[i:j], strict=True)]
    return subtract([(lo, hi)], clip(busy, lo, hi))
