"""The one `median` of torchpace, and byte counts as words."""

from __future__ import annotations

from collections.abc import Iterable


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


def fmt_bytes(n: float) -> str:
    """Bytes for a summary line: 19.3 MB, 512 kB, 12 B (decimal units)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
