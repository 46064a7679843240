"""Outlier steps: far longer than the steady ones, left out of every figure over typical steps.

The one rule for typical steps (docs/measure.md): reports' medians, both sides of `compare`, and
the steps of every run `bench` and `doctor --verify` time. A step longer than OUTLIER_FACTOR x the
median of the steady steps is an outlier (checkpointing, evaluation, a recompilation, a host busy
with other work), unless waiting for its own batch takes most of its excess: a loader that cannot
keep up stalls again and again, and that is the loop's steady state. A step that fetched more
batches than a steady one (a validation loader ran inside it) is an outlier even when its excess
is loading. The label says what the trace shows, not a guess at the cause: the batches it fetched,
whether it ran more host ops than a steady step or the same ones slower, and the phases its extra
time went to.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.trace.stats import median
from torchpace.trace.summary import Phase, StepBreakdown

if TYPE_CHECKING:
    from torchpace.trace.recording import Recording

OUTLIER_FACTOR = 2.0
MIN_STEPS = 3  # fewer steady steps than this have no median to stand out from


def is_outlier(
    ms: float,
    typical_ms: float,
    wait_ms: float | None = None,
    batches: float | None = None,
    usual_batches: float | None = None,
) -> bool:
    """Longer than OUTLIER_FACTOR x the median step, for a reason other than waiting for its own
    batch (unknown waits and batches: plain timings, judged by time alone)."""
    if typical_ms <= 0 or ms <= OUTLIER_FACTOR * typical_ms:
        return False
    if batches is not None and usual_batches is not None and batches > usual_batches:
        return True  # another loader ran inside it: its waits are not this step's batch
    return wait_ms is None or wait_ms < 0.5 * (ms - typical_ms)


def typical(values: Sequence[float]) -> tuple[list[float], list[tuple[int, str]]]:
    """Plain per-step times (a timed run): the typical ones, and (position, why) for the others."""
    if len(values) < MIN_STEPS:
        return list(values), []
    typical_ms = median(values)
    out = [i for i, v in enumerate(values) if is_outlier(v, typical_ms)]
    apart = [(i, f"{values[i] / typical_ms:.1f}x the median step") for i in out]
    return [v for i, v in enumerate(values) if i not in set(out)], apart


def label_outliers(trace: Recording, steps: list[StepBreakdown]) -> list[StepBreakdown]:
    """The steps with `outlier` set on those the rule sets apart, each labelled with what the
    trace shows of it."""
    steady = [s for s in steps if not s.warmup]  # warm-up steps are labelled already
    if len(steady) < MIN_STEPS:
        return steps
    typical_ms = median(s.duration_ms for s in steady)
    counts = [s.batches for s in steady if s.batches is not None]
    usual = median(counts) if counts else None

    def outlier(s: StepBreakdown) -> bool:
        wait = s.phase_ms.get(Phase.DATALOADER, 0.0)
        return not s.warmup and is_outlier(s.duration_ms, typical_ms, wait, s.batches, usual)

    if not any(outlier(s) for s in steady):
        return steps
    starts = [o.ts_us for o in trace.host_ops]
    ends = {s.index: s.end_us for s in trace.steps}

    def ops(s: StepBreakdown) -> int:
        return bisect_left(starts, ends[s.index]) - bisect_left(starts, s.start_us)

    return [
        replace(s, outlier=_outlier_label(s, steady, typical_ms, ops, usual)) if outlier(s) else s
        for s in steps
    ]


def _outlier_label(
    step: StepBreakdown,
    steady: list[StepBreakdown],
    typical_ms: float,
    ops: Callable[[StepBreakdown], int],
    usual_batches: float | None,
) -> str:
    """What the trace shows of a long step: the batches it fetched when more than a steady step,
    whether it ran more host ops (`ops`) than a steady step or the same ones slower, and which
    phases its extra time went to (no guess at a cause)."""
    usual, mine = median(ops(s) for s in steady), ops(step)
    work = (
        "the same ops as a steady step, run slower"
        if abs(mine - usual) <= max(2.0, 0.01 * usual)
        else f"{mine - usual:+.0f} ops against a steady step"
    )
    if step.batches is not None and usual_batches is not None and step.batches > usual_batches:
        work = (
            f"{step.batches} batches fetched where a steady step fetches {usual_batches:g}, {work}"
        )
    extra = {p: step.phase_ms[p] - median(s.phase_ms[p] for s in steady) for p in Phase}
    top = [(p, v) for p, v in sorted(extra.items(), key=lambda pv: -pv[1])[:2] if v > 0]
    where = "; extra time in " + ", ".join(f"{p.value} {v:+.1f} ms" for p, v in top) if top else ""
    return f"{step.duration_ms / typical_ms:.1f}x the median step: {work}{where}"
