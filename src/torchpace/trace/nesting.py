"""Which ranges enclose which on one thread: host ops nest like a call stack."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Protocol


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
