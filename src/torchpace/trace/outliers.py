"""Outlier steps: far longer than the steady ones, left out of the figures over typical steps.

A step longer than OUTLIER_FACTOR x the median of the steady steps is an outlier (checkpointing,
evaluation, a recompilation, a host busy with other work), unless waiting for its batch takes most
of its excess: a loader that cannot keep up stalls again and again, and that is the loop's steady
state. The label says what the trace shows, not a guess at the cause: whether the step ran more
host ops than a steady one or the same ones slower, and the phases its extra time went to.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.trace.stats import median
from torchpace.trace.summary import Phase, StepBreakdown

if TYPE_CHECKING:
    from torchpace.trace.model import Trace

OUTLIER_FACTOR = 2.0


def label_outliers(trace: Trace, steps: list[StepBreakdown]) -> list[StepBreakdown]:
    """The steps with `outlier` set on those longer than OUTLIER_FACTOR x the median steady
    step (not for waiting on data), each labelled with what the trace shows of it."""
    steady = [s for s in steps if not s.warmup]  # warm-up steps are labelled already
    if len(steady) < 3:
        return steps
    typical_ms = median(s.duration_ms for s in steady)
    if not any(_outlier(s, typical_ms) for s in steady):
        return steps
    starts = [o.ts_us for o in trace.host_ops]
    ends = {s.index: s.end_us for s in trace.steps}

    def ops(s: StepBreakdown) -> int:
        return bisect_left(starts, ends[s.index]) - bisect_left(starts, s.start_us)

    return [
        replace(s, outlier=_outlier_label(s, steady, typical_ms, ops))
        if not s.warmup and _outlier(s, typical_ms)
        else s
        for s in steps
    ]


def _outlier_label(
    step: StepBreakdown,
    steady: list[StepBreakdown],
    typical_ms: float,
    ops: Callable[[StepBreakdown], int],
) -> str:
    """What the trace shows of a long step: whether it ran more host ops (`ops`) than a steady
    step or the same ones slower, and which phases its extra time went to (no guess at a cause)."""
    usual, mine = median(ops(s) for s in steady), ops(step)
    work = (
        "the same ops as a steady step, run slower"
        if abs(mine - usual) <= max(2.0, 0.01 * usual)
        else f"{mine - usual:+.0f} ops against a steady step"
    )
    extra = {p: step.phase_ms[p] - median(s.phase_ms[p] for s in steady) for p in Phase}
    top = [(p, v) for p, v in sorted(extra.items(), key=lambda pv: -pv[1])[:2] if v > 0]
    where = "; extra time in " + ", ".join(f"{p.value} {v:+.1f} ms" for p, v in top) if top else ""
    return f"{step.duration_ms / typical_ms:.1f}x the median step: {work}{where}"


def _outlier(step: StepBreakdown, typical_ms: float) -> bool:
    """Longer than OUTLIER_FACTOR x the median step, for a reason other than waiting for data."""
    excess = step.duration_ms - typical_ms
    if typical_ms <= 0 or step.duration_ms <= OUTLIER_FACTOR * typical_ms:
        return False
    return step.phase_ms.get(Phase.DATALOADER, 0.0) < 0.5 * excess
