"""BEFORE against AFTER with verdicts: step time, phases, kernels, ops and findings.

Every change is a difference of per-step medians with a bootstrap 95% interval over the steps of
each side (torchpace.measure.stats), called "no measurable change" when the interval holds zero or
the change is below 3% of the step. Two recorded runs were not interleaved: drift of the machine
between them is not in the intervals, and the comparison says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from torchpace.compare.sides import FindingRef, Side
from torchpace.measure import stats

NOT_INTERLEAVED = (
    "the two runs were recorded apart, not interleaved: the intervals hold the step-to-step "
    "noise of each run, not a change of the machine between them"
)
# What counts as the same finding with another number: saving or severity moved this much.
SAVING_CHANGE = 0.10


@dataclass(frozen=True)
class NamedChange:
    """A kernel, operator or phase and how its time per step changed."""

    name: str
    change: stats.Change


@dataclass(frozen=True)
class FindingChange:
    """A finding on both sides whose severity or saving moved."""

    before: FindingRef
    after: FindingRef


@dataclass(frozen=True)
class Findings:
    """Findings resolved (before only), new (after only), changed and unchanged."""

    resolved: tuple[FindingRef, ...] = ()
    new: tuple[FindingRef, ...] = ()
    changed: tuple[FindingChange, ...] = ()
    unchanged: tuple[FindingRef, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """The whole comparison, plain data for the reporters."""

    before: Side
    after: Side
    step: stats.Ratio
    step_change: stats.Change
    verdict: stats.Verdict
    phases: tuple[NamedChange, ...]
    kernels: tuple[NamedChange, ...] | None  # None: a side has no kernels (CPU, a report)
    ops: tuple[NamedChange, ...] | None
    findings: Findings
    notes: tuple[str, ...] = field(default_factory=tuple)
    why: str = ""  # an inconclusive verdict: the spread and what would settle it

    def headline(self) -> str:
        """One sentence: the verdict, the medians and the interval (none when inconclusive)."""
        c, r = self.step_change, self.step
        span = f"{c.before_ms:.1f} -> {c.after_ms:.1f} ms per step"
        if self.verdict == "inconclusive":  # an interval that wide says nothing: no ratio
            return f"{self.why} ({span})"
        if self.verdict == "no-change":
            return (
                f"no measurable change: {span} (speedup {r.speedup:.2f}x, 95% interval "
                f"{r.speedup_low:.2f}-{r.speedup_high:.2f})"
            )
        word = "faster" if self.verdict == "faster" else "slower"
        factor = r.speedup if word == "faster" else 1 / r.speedup
        return (
            f"AFTER is {factor:.2f}x {word}: {span} (speedup 95% interval "
            f"{r.speedup_low:.2f}-{r.speedup_high:.2f})"
        )


def compare(before: Side, after: Side, *, top: int = 10, seed: int = 0) -> Comparison:
    """Compare two sides; `top` kernels and operators by the size of their change."""
    for side in (before, after):
        if not side.step_ms:
            raise ValueError(f"{side.path}: no typical steps to compare")
    step = stats.ratio([(list(before.step_ms), list(after.step_ms))], seed=seed)
    scale = stats.median(list(before.step_ms))
    step_change = stats.change(list(before.step_ms), list(after.step_ms), seed=seed)
    notes = [NOT_INTERLEAVED, *_side_notes(before, after)]
    verdict = _verdict(step, step_change)
    return Comparison(
        before=before,
        after=after,
        step=step,
        step_change=step_change,
        verdict=verdict,
        phases=_named(before.phase_ms, after.phase_ms, scale, seed, limit=None),
        kernels=_maybe(before.kernel_ms, after.kernel_ms, scale, seed, top),
        ops=_maybe(before.op_ms, after.op_ms, scale, seed, top),
        findings=diff_findings(before.findings, after.findings),
        notes=tuple(notes),
        why=_inconclusive(step, before, after) if verdict == "inconclusive" else "",
    )


def _verdict(step: stats.Ratio, change: stats.Change) -> stats.Verdict:
    """Faster or slower only when the ratio's interval and the difference agree; else no change
    when the interval is narrow, inconclusive when it is not."""
    verdict = step.verdict()
    if verdict == change.verdict or verdict == "inconclusive":
        return verdict
    return "no-change" if step.settled() else "inconclusive"


def _inconclusive(step: stats.Ratio, before: Side, after: Side) -> str:
    """The spread of each side's typical steps, and the steps that would settle the interval
    (the bootstrap's width shrinks as 1/sqrt(steps))."""
    spreads = " and ".join(f"{_spread(s.step_ms):.0%}" for s in (before, after))
    steps = min(len(before.step_ms), len(after.step_ms))
    needed = math.ceil(steps * (step.half_width / math.log1p(stats.SETTLE)) ** 2)
    return (
        f"inconclusive: step-to-step spread {spreads} (interquartile range over the median, "
        f"before and after); about {max(needed - steps, 1)} more typical steps a side would "
        "settle it"
    )


def _spread(values: tuple[float, ...]) -> float:
    ordered = sorted(values)
    mid = stats.median(ordered)
    q1, q3 = ordered[len(ordered) // 4], ordered[(3 * len(ordered)) // 4]
    return (q3 - q1) / mid if mid > 0 else 0.0


def _side_notes(before: Side, after: Side) -> list[str]:
    notes = [_apart_note(side) for side in (before, after) if side.set_apart]
    if before.device != after.device:
        notes.append(f"the runs used different devices: {before.device} and {after.device}")
    if before.ranks != after.ranks:
        notes.append(f"the runs had {before.ranks} and {after.ranks} ranks")
    for side in (before, after):
        n = len(side.step_ms)
        if n < 2:
            notes.append(f"{side.path}: only {n} steady step: too few to decide")
        elif n < 5:
            notes.append(f"{side.path}: only {n} steady steps: the intervals are coarse")
    notes += [n for n in (*before.notes, *after.notes) if n.startswith("a JSON report")][:1]
    return notes


def _apart_note(side: Side) -> str:
    """The steps of a side left out of the typical ones, named (the first one's reason)."""
    steps = ", ".join(str(i) for i, _ in side.set_apart)
    first, why = side.set_apart[0]
    label = "step" if len(side.set_apart) == 1 else "steps"
    return f"{side.path}: {label} {steps} set apart, not typical (step {first}: {why})"


def _maybe(
    before: Mapping[str, tuple[float, ...]] | None,
    after: Mapping[str, tuple[float, ...]] | None,
    scale: float,
    seed: int,
    top: int,
) -> tuple[NamedChange, ...] | None:
    if before is None or after is None:
        return None
    return _named(before, after, scale, seed, limit=top)


def _named(
    before: Mapping[str, tuple[float, ...]],
    after: Mapping[str, tuple[float, ...]],
    scale: float,
    seed: int,
    limit: int | None,
) -> tuple[NamedChange, ...]:
    """Changes per name, largest first; a name on one side only counts 0 ms per step on the other."""
    n_before = len(next(iter(before.values()), ()))
    n_after = len(next(iter(after.values()), ()))
    names = list(dict.fromkeys([*before, *after]))

    def mean(values: tuple[float, ...]) -> float:
        return sum(values) / len(values) if values else 0.0

    def shift(name: str) -> float:
        return abs(mean(after.get(name, ())) - mean(before.get(name, ())))

    if limit is not None:  # intervals only for the largest movers: a trace has hundreds of names
        names = sorted(names, key=shift, reverse=True)[:limit]
    out = []
    for name in names:
        b = list(before.get(name) or (0.0,) * max(n_before, 1))
        a = list(after.get(name) or (0.0,) * max(n_after, 1))
        out.append(NamedChange(name, stats.change(b, a, scale_ms=scale, seed=seed)))
    if limit is None:
        return tuple(out)
    return tuple(sorted(out, key=lambda c: abs(c.change.delta_ms), reverse=True))


def diff_findings(before: tuple[FindingRef, ...], after: tuple[FindingRef, ...]) -> Findings:
    """Pair findings by rule and rank (in order, for a rule that fires more than once)."""
    pending: dict[tuple[str, int | None], list[FindingRef]] = {}
    for f in after:
        pending.setdefault((f.rule, f.rank), []).append(f)
    resolved, changed, unchanged = [], [], []
    for f in before:
        twins = pending.get((f.rule, f.rank))
        if not twins:
            resolved.append(f)
            continue
        g = twins.pop(0)
        (changed.append(FindingChange(f, g)) if _moved(f, g) else unchanged.append(g))
    new = [f for twins in pending.values() for f in twins]
    return Findings(tuple(resolved), tuple(new), tuple(changed), tuple(unchanged))


def _moved(a: FindingRef, b: FindingRef) -> bool:
    if a.severity != b.severity:
        return True
    if (a.saving_ms is None) != (b.saving_ms is None):
        return True
    if a.saving_ms is None or b.saving_ms is None:
        return False
    return abs(b.saving_ms - a.saving_ms) > SAVING_CHANGE * max(abs(a.saving_ms), 1e-9)
