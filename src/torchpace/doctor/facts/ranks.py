"""Per-rank work and waiting: what the multi-rank headline and rank-imbalance both read.

In data-parallel training every rank waits for the slowest in its collectives, so median step
times come out nearly equal and cannot name the straggler. Each rank's work per step (each step
minus its exposed collective time, the time it spent only waiting on communication; the median
over the typical steps) can. The
headline (doctor/diagnose.py), the rank-imbalance rule and the reports compare ranks by this one
measure, computed once per trace by `Facts.work` (doctor/facts/__init__.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import msgspec

from torchpace.doctor.facts.collectives import CommStats
from torchpace.doctor.facts.kernels import typical_window
from torchpace.doctor.facts.ops import MathOp, in_windows
from torchpace.trace.model import Trace
from torchpace.trace.stats import median
from torchpace.trace.summary import Breakdown, Phase, TraceInfo

T = TypeVar("T")


@dataclass(frozen=True)
class RankWork:
    """One rank's median step, split into work and waiting in collectives."""

    rank: int
    step_ms: float
    wait_ms: float  # collective time with no compute beside it (waiting for the others)
    dataloader_ms: float
    gflop: float | None  # matmul/conv GFLOP per step from recorded shapes
    example_shape: str
    # Each typical step's work: its length minus its own exposed collective time. The median of
    # these, not the median step minus the median wait: on a 2-rank CPU run two slow steps of one
    # rank and a different step's long wait made a 0.5 ms "straggler" of noise.
    step_work_ms: tuple[float, ...] = ()

    @property
    def work_ms(self) -> float:
        """The median step's work: step minus the collective time it only waited."""
        if self.step_work_ms:
            return median(self.step_work_ms)
        return max(0.0, self.step_ms - self.wait_ms)


def measure_work(
    trace: Trace, rank: int, stats: CommStats | None, ops: Sequence[MathOp] | None
) -> RankWork:
    """The work one rank does per step, from its collective stats and (when recorded) its
    matmul/conv ops; `Facts.work` computes it once per trace."""
    ranges, steps = typical_window(trace)
    gflop, example = None, ""
    if ops is not None:
        ops = in_windows(ops, ranges)
        gflop = sum(o.flops for o in ops) / steps / 1e9
        example = " x ".join(str(list(s)) for s in ops[0].shapes) if ops else ""
    exposed = stats.exposed_per_step_ms if stats is not None else ()
    works = tuple(
        max(0.0, (hi - lo) / 1e3 - e) for (lo, hi), e in zip(ranges, exposed, strict=False)
    )
    return RankWork(
        rank=rank,
        step_ms=trace.breakdown.median_step_ms,
        wait_ms=stats.exposed_ms if stats is not None else 0.0,
        dataloader_ms=trace.breakdown.median_phase_ms.get(Phase.DATALOADER, 0.0),
        gflop=gflop,
        example_shape=example,
        step_work_ms=works if len(works) == len(ranges) else (),
    )


def slowest_rank(ranks: Sequence[RankWork]) -> RankWork:
    """The rank that works longest per step (the others wait for it in collectives)."""
    return max(ranks, key=lambda r: r.work_ms)


class RankFacts(msgspec.Struct, frozen=True):
    """What the cross-rank judgement reads of one rank: its header, breakdown, work and whether
    it joins collectives. A few kB where the rank's Trace is tens of MB, so a folder of ranks is
    judged from these (doctor/summary.py) with no rank's events kept.

    A fact that could not be measured holds the exception that said so (NotApplicable, or a
    bug's), raised again where it is read: the rules see what they saw on the Trace itself.
    """

    info: TraceInfo
    breakdown: Breakdown
    rank: int  # decided once, by trace.summary.rank_of, where the ranks are put in order
    measured: RankWork | Exception
    joins: bool | Exception  # whether its typical steps hold collective time

    @property
    def work(self) -> RankWork:
        """Its work and collective wait per step, under `rank`."""
        work = _outcome(self.measured)
        return work if work.rank == self.rank else replace(work, rank=self.rank)

    @property
    def communicates(self) -> bool:
        """Whether its typical steps hold collective time (kernels or host ranges)."""
        return _outcome(self.joins)


def _outcome(value: T | Exception) -> T:
    if isinstance(value, Exception):
        raise value
    return value
