"""Per-rank work and waiting: what the multi-rank headline and rank-imbalance both read.

In data-parallel training every rank waits for the slowest in its collectives, so median step
times come out nearly equal and cannot name the straggler. Each rank's work per step (its median
step minus its exposed collective time, the time it spent only waiting on communication) can. The
headline (doctor/diagnose.py), the rank-imbalance rule and the reports compare ranks by this one
measure, computed once per trace here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from torchpace.doctor.facts.collectives import comm_stats
from torchpace.doctor.facts.kernels import typical_window
from torchpace.doctor.facts.ops import has_shapes, in_windows, math_ops
from torchpace.trace.model import Trace
from torchpace.trace.summary import Phase


@dataclass(frozen=True)
class RankWork:
    """One rank's median step, split into work and waiting in collectives."""

    rank: int
    step_ms: float
    wait_ms: float  # collective time with no compute beside it (waiting for the others)
    dataloader_ms: float
    gflop: float | None  # matmul/conv GFLOP per step from recorded shapes
    example_shape: str

    @property
    def work_ms(self) -> float:
        """The median step minus the exposed collective time."""
        return max(0.0, self.step_ms - self.wait_ms)


def rank_work(trace: Trace, position: int) -> RankWork:
    """The work one rank does per step, from its own trace (computed once per trace)."""
    rank = trace.info.rank if trace.info.rank is not None else position
    cached = trace._cache.get("facts:rank_work")
    if not isinstance(cached, RankWork):
        cached = trace._cache["facts:rank_work"] = _measure(trace, rank)
    return cached if cached.rank == rank else replace(cached, rank=rank)


def _measure(trace: Trace, rank: int) -> RankWork:
    stats = comm_stats(trace)
    ranges, steps = typical_window(trace)
    gflop, example = None, ""
    if has_shapes(trace):
        ops = in_windows(math_ops(trace), ranges)
        gflop = sum(o.flops for o in ops) / steps / 1e9
        example = " x ".join(str(list(s)) for s in ops[0].shapes) if ops else ""
    return RankWork(
        rank=rank,
        step_ms=trace.breakdown.median_step_ms,
        wait_ms=stats.exposed_ms if stats is not None else 0.0,
        dataloader_ms=trace.breakdown.median_phase_ms.get(Phase.DATALOADER, 0.0),
        gflop=gflop,
        example_shape=example,
    )


def rank_works(traces: Sequence[Trace]) -> list[RankWork]:
    """Every rank's work, in the order of `traces` (a rank's position names it when unrecorded)."""
    return [rank_work(t, i) for i, t in enumerate(traces)]


def slowest_rank(ranks: Sequence[RankWork]) -> RankWork:
    """The rank that works longest per step (the others wait for it in collectives)."""
    return max(ranks, key=lambda r: r.work_ms)
