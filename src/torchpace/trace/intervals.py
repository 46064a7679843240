"""Interval arithmetic on [start, end) ranges in microseconds: unions, clipping, coverage.

Lists of (start, end) tuples, with `Coverage` for bisect-based queries (cheap for tens of
thousands of ranges and many small queries). Every function is linear (or log) in its input, plus
a sort that is linear too when the input is already sorted runs (timsort).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate
from operator import itemgetter, sub

import msgspec

Interval = tuple[float, float]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Merge overlapping ranges into disjoint sorted ones."""
    out: list[Interval] = []
    for start, end in sorted(intervals, key=itemgetter(0)):
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
    out = []
    for s, e in intervals:  # comparisons, not min()/max() calls: this runs per range per step
        s = s if s > lo else lo
        e = e if e < hi else hi
        if e > s:
            out.append((s, e))
    return out


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


class Coverage(msgspec.Struct, frozen=True):
    """Disjoint sorted ranges as parallel lists, with prefix sums for O(log n) coverage queries."""

    starts: list[float]
    ends: list[float]
    _before: list[float]  # _before[k]: covered time in ranges 0..k-1

    @classmethod
    def of(cls, intervals: Iterable[Interval]) -> Coverage:
        """The union of `intervals`, ready for queries (union() without its list of tuples)."""
        starts: list[float] = []
        ends: list[float] = []
        for start, end in sorted(intervals, key=itemgetter(0)):
            if end <= start:
                continue
            if ends and start <= ends[-1]:
                if end > ends[-1]:
                    ends[-1] = end
            else:
                starts.append(start)
                ends.append(end)
        return cls(starts, ends, [0.0, *accumulate(map(sub, ends, starts))])

    @classmethod
    def of_sorted(cls, starts: Iterable[float], ends: Iterable[float]) -> Coverage:
        """The union of ranges given as two columns already sorted by start: of() without its
        tuples and its sort (a third of the time on 20k kernels)."""
        out_starts: list[float] = []
        out_ends: list[float] = []
        lo = hi = float("-inf")
        for start, end in zip(starts, ends, strict=True):
            if end <= start:
                continue
            if start <= hi:
                if end > hi:
                    hi = end
            else:
                out_starts.append(lo)
                out_ends.append(hi)
                lo, hi = start, end
        out_starts.append(lo)
        out_ends.append(hi)
        del out_starts[0], out_ends[0]  # the sentinel range before the first
        return cls(out_starts, out_ends, [0.0, *accumulate(map(sub, out_ends, out_starts))])

    @classmethod
    def of_disjoint(cls, merged: Sequence[Interval]) -> Coverage:
        """Ranges that are already disjoint and sorted (e.g. from union())."""
        starts = [s for s, _ in merged]
        ends = [e for _, e in merged]
        return cls(starts, ends, [0.0, *accumulate(e - s for s, e in merged)])

    def __len__(self) -> int:
        return len(self.starts)

    def covered_until(self, t: float) -> float:
        """Covered time in (-inf, t]."""
        k = bisect_right(self.starts, t) - 1
        if k < 0:
            return 0.0
        return self._before[k] + min(t, self.ends[k]) - self.starts[k]

    def covered(self, lo: float, hi: float) -> float:
        """Covered time within [lo, hi)."""
        return max(0.0, self.covered_until(hi) - self.covered_until(lo)) if hi > lo else 0.0

    def intervals(self) -> list[Interval]:
        """The disjoint sorted ranges."""
        return list(zip(self.starts, self.ends, strict=True))

    def overlap_with(self, other: Coverage) -> float:
        """Time covered by both: one sweep over the two sorted lists."""
        a_starts, a_ends, b_starts, b_ends = self.starts, self.ends, other.starts, other.ends
        n, m = len(a_starts), len(b_starts)
        if not n or not m:
            return 0.0
        # Skip what ends before the other list begins; stop once either is used up.
        i, j = bisect_right(a_ends, b_starts[0]), bisect_right(b_ends, a_starts[0])
        total = 0.0
        while i < n and j < m:
            a_end, b_end = a_ends[i], b_ends[j]
            lo = a_starts[i] if a_starts[i] > b_starts[j] else b_starts[j]
            if a_end < b_end:
                if a_end > lo:
                    total += a_end - lo
                i += 1
            else:
                if b_end > lo:
                    total += b_end - lo
                j += 1
        return total

    def overlap(self, ranges: Sequence[Interval]) -> float:
        """Covered time within each of `ranges`, summed."""
        if not self.starts or not ranges:
            return 0.0
        f = self.covered_until
        return sum(map(f, [e for _, e in ranges])) - sum(map(f, [s for s, _ in ranges]))

    def gaps(self, lo: float, hi: float) -> list[Interval]:
        """The parts of [lo, hi) not covered (e.g. the GPU's idle windows)."""
        i = bisect_right(self.ends, lo)
        j = bisect_left(self.starts, hi)
        out: list[Interval] = []
        cur = lo
        for start, end in zip(self.starts[i:j], self.ends[i:j], strict=True):
            if start > cur:
                out.append((cur, start))
            cur = end  # disjoint and sorted: each end is past the previous one
        if cur < hi:
            out.append((cur, hi))
        return out

    def next_start(self, t: float) -> tuple[int, float | None]:
        """(index, start) of the first range starting at or after t; (n, None) if none."""
        i = bisect_left(self.starts, t)
        return i, self.starts[i] if i < len(self.starts) else None
