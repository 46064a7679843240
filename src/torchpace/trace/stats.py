"""Per-step statistics that rules share: totals per typical step and their medians."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchpace.trace.model import Trace


def median(values: Iterable[float]) -> float:
    """The middle value (the mean of the two middle ones for an even count), as statistics.median.

    Here rather than that module: `statistics` imports random, fractions and decimal, 3 ms of
    every `analyze`, which is bound by its imports while the trace is still being read.
    """
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        raise ValueError("median of no values")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def per_step(trace: Trace, items: Iterable[tuple[float, float]]) -> list[float]:
    """Sum `value` of (ts_us, value) pairs per typical step (one entry per typical step)."""
    steps = trace.typical_steps
    starts = [s.ts_us for s in steps]
    totals = [0.0] * len(steps)
    for ts, value in items:
        i = bisect_right(starts, ts) - 1
        if i >= 0 and ts <= steps[i].end_us:
            totals[i] += value
    return totals


def median_per_step(trace: Trace, items: Iterable[tuple[float, float]]) -> float:
    """Median over typical steps of the per-step sum of (ts_us, value) pairs; 0 without steps."""
    totals = per_step(trace, items)
    return median(totals) if totals else 0.0


def fmt_bytes(n: float) -> str:
    """Bytes for a summary line: 19.3 MB, 512 kB, 12 B (decimal units)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
