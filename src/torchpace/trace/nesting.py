"""Which ranges enclose which on one thread: host ops nest like a call stack."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from operator import attrgetter
from typing import Protocol, TypeVar


class Ranged(Protocol):
    """Anything with a start and a duration in microseconds."""

    @property
    def ts_us(self) -> float: ...

    @property
    def dur_us(self) -> float: ...


# Kineto rounds child and parent ends independently; allow this much slack when nesting.
_SLACK_US = 0.5


class Nesting:
    """Ranges of one thread (sorted by start) with each one's parent, for enclosing-range queries."""

    def __init__(self, items: Sequence[Ranged]) -> None:
        self.items = items
        self.starts = [it.ts_us for it in items]
        self.ends = [it.ts_us + it.dur_us for it in items]
        self.parent = self._parents()

    def _parents(self) -> list[int]:
        parent = [-1] * len(self.items)
        stack: list[int] = []
        ends = self.ends
        for i, start in enumerate(self.starts):
            while stack and ends[stack[-1]] + _SLACK_US < start:
                stack.pop()
            while stack and ends[stack[-1]] + _SLACK_US < ends[i]:
                stack.pop()  # overlaps without nesting (different async ranges): not a parent
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
        return parent

    def innermost(self, ts_us: float, end_us: float) -> int:
        """Index of the innermost range containing [ts_us, end_us], or -1."""
        i = bisect_right(self.starts, ts_us + _SLACK_US) - 1
        while i >= 0 and self.ends[i] + _SLACK_US < end_us:
            i = self.parent[i]
        return i

    def chain(self, ts_us: float, end_us: float) -> list[int]:
        """Indices of every range containing [ts_us, end_us], innermost first."""
        out = []
        i = self.innermost(ts_us, end_us)
        while i >= 0:
            out.append(i)
            i = self.parent[i]
        return out


_TS = attrgetter("ts_us")
_DUR = attrgetter("dur_us")


class Containing:
    """Ranges of one thread (sorted by start) for a few "which contain [ts, end]" queries, each
    answered exactly as a scan of every earlier range would, without building a Nesting: only the
    ranges that start within `long_us` before the query can contain it, except the few longer
    ones (about 1 in 64), which are kept apart and checked each time."""

    def __init__(self, items: Sequence[Ranged]) -> None:
        self.items = items
        self.starts = list(map(_TS, items))
        durations = list(map(_DUR, items))
        sample = sorted(durations[:: max(1, len(durations) // 1024)])
        self.long_us = sample[-max(1, len(sample) // 64)] if sample else 0.0
        self.long = list(compress(range(len(items)), map(self.long_us.__lt__, durations)))

    def containing(self, ts_us: float, end_us: float) -> list[int]:
        """Indices of every range with start <= ts + slack and end + slack >= end_us, latest
        start first (ties: last in the list first)."""
        items = self.items
        i = bisect_right(self.starts, ts_us + _SLACK_US)
        # A range no longer than long_us starting before this cannot reach end_us (4 us spare:
        # a float near 1.7e15, Kineto's epoch microseconds, is exact to 0.25 us; the test below
        # decides).
        j = min(i, bisect_left(self.starts, end_us - _SLACK_US - self.long_us - 4.0))
        # The test of the scan it replaces, as written there (the same rounding).
        s = _SLACK_US
        near = [
            k for k in range(i - 1, j - 1, -1) if items[k].ts_us + items[k].dur_us + s >= end_us
        ]
        far = self.long[: bisect_left(self.long, j)]
        return near + [k for k in reversed(far) if items[k].ts_us + items[k].dur_us + s >= end_us]


T = TypeVar("T")


def outermost(items: Iterable[T], span: Callable[[T], tuple[int, float, float]]) -> list[T]:
    """The items not inside an earlier one on their thread; `span`: (thread, start, end). An op
    counted whole already holds what it ran itself (an mm a convolution ran): nothing twice."""
    out: list[T] = []
    end: dict[int, float] = {}
    for item, (tid, start, stop) in sorted(((i, span(i)) for i in items), key=lambda p: p[1][:2]):
        if start < end.get(tid, float("-inf")):
            continue
        end[tid] = stop
        out.append(item)
    return out
