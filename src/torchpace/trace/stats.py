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


def fmt_bytes(n: float, *, decimal: bool = False) -> str:
    """Bytes as words, as every report shows `_bytes` evidence: 128.0 MiB, 1.5 KiB, 12 B;
    `decimal` (beside a bandwidth in GB/s): 19.3 MB, 512 kB."""
    base = 1000 if decimal else 1024
    units = ("kB", "MB", "GB", "TB") if decimal else ("KiB", "MiB", "GiB", "TiB")
    for power in range(len(units), 0, -1):
        if abs(n) >= base**power:
            return f"{n / base**power:.1f} {units[power - 1]}"
    return f"{n:.0f} B"
