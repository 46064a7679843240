"""Top kernels and host operators by time over a whole trace (the HTML report's tables).

Computed once from the loaded Trace by `diagnose(..., top=True)` and carried, as plain data, in
`Diagnosis.top`: reporters never read the trace again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchpace.trace.names import STEP_MARKER

if TYPE_CHECKING:
    from torchpace.trace.events import HostOp
    from torchpace.trace.model import Trace


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


def _rows(names: list[str], calls: list[int], ms: list[float], limit: int) -> tuple[TopRow, ...]:
    total = sum(ms)
    order = sorted(range(len(names)), key=lambda i: -ms[i])[:limit]
    return tuple(
        TopRow(names[i], calls[i], ms[i], ms[i] / total if total > 0 else 0.0) for i in order
    )


def _grouped(pairs: Iterable[tuple[str, float]]) -> tuple[list[str], list[int], list[float]]:
    calls: dict[str, int] = defaultdict(int)
    ms: dict[str, float] = defaultdict(float)
    for name, dur_us in pairs:
        calls[name] += 1
        ms[name] += dur_us / 1e3
    names = list(ms)
    return names, [calls[n] for n in names], [ms[n] for n in names]


def self_times_us(ops: Sequence[HostOp]) -> list[float]:
    """Each op's own time: its duration minus that of the ops nested directly inside it."""
    own = [op.dur_us for op in ops]
    open_: dict[int, list[int]] = defaultdict(list)  # per thread: indices of enclosing ops
    for i, op in enumerate(ops):
        stack = open_[op.tid]
        while stack and ops[stack[-1]].end_us <= op.ts_us:
            stack.pop()
        if stack:
            own[stack[-1]] -= op.dur_us
        stack.append(i)
    return [max(0.0, t) for t in own]


def top_tables(trace: Trace, *, limit: int = 10) -> TopTables:
    """The `limit` longest kernels (GPU time) and host operators (self time) of a trace.

    `ProfilerStep#N` ranges are left out: they are the profiler's step markers, not work, and
    their self time (the step's gaps between ops) would top the table once per step.
    """
    kernels = _rows(*_grouped((k.name, k.dur_us) for k in trace.kernels), limit)
    ops = [o for o in trace.host_ops if o.kind == "op" and not o.name.startswith(STEP_MARKER)]
    own = self_times_us(ops)
    return TopTables(kernels, _rows(*_grouped(zip((o.name for o in ops), own, strict=True)), limit))
