"""The measurement core's results as the report's plain records (doctor/verification.py)."""

from __future__ import annotations

from torchpace.doctor.verification import ArmFigures, MeasuredSaving, Status
from torchpace.measure import ArmResult
from torchpace.trace.stats import median
from torchpace.verify.appliers import Fix
from torchpace.verify.appliers.base import NOT_APPLICABLE

# Runs of each arm needed for a verdict: one run shows no run-to-run drift (measure/stats.py).
MIN_RUNS = 2


def run_medians(arm: ArmResult) -> list[float]:
    """Each run's median step (ms)."""
    return [median(run.timed.costs()) for run in arm.runs]


def figures(label: str, arm: ArmResult, base: ArmResult) -> ArmFigures:
    """One arm against the baseline: both step times with their run ranges, the speedup."""
    ratio = arm.ratio
    assert ratio is not None, "the baseline has no ratio to itself"
    mine, theirs = run_medians(arm), run_medians(base)
    return ArmFigures(
        label=label,
        baseline_ms=base.median_ms,
        baseline_low_ms=min(theirs),
        baseline_high_ms=max(theirs),
        fixed_ms=arm.median_ms,
        fixed_low_ms=min(mine),
        fixed_high_ms=max(mine),
        speedup=ratio.speedup,
        speedup_low=ratio.speedup_low,
        speedup_high=ratio.speedup_high,
        verdict=arm.verdict,
        runs=len(arm.runs),
        flags=arm.flags,
        why=arm.why,
    )


def helps(f: ArmFigures) -> bool:
    """Faster outside the noise, and not flagged as implausible."""
    return f.verdict == "faster" and not f.flags


def outcome(
    fixes: list[Fix],
    measured: dict[str, ArmFigures],
    failed: dict[str, str],
    left_out: set[str],
) -> MeasuredSaving:
    """One finding's verdict from its candidates' results: the best that helps, or why none."""
    tried = sorted(
        (measured[f.label] for f in fixes if f.label in measured),
        key=lambda a: a.speedup,
        reverse=True,
    )
    words = "; ".join(dict.fromkeys(f.label for f in fixes))
    numerics = next((f.numerics for f in fixes if f.numerics), "")
    if tried:
        return _judged(tried, words, numerics, _partial(fixes, failed))
    return _unmeasured(fixes, failed, left_out, words, numerics)


def _unmeasured(
    fixes: list[Fix], failed: dict[str, str], left_out: set[str], words: str, numerics: str
) -> MeasuredSaving:
    """Why no candidate was measured: it needs code, it failed, or time ran out."""
    why = [f"{f.label}: {failed[f.label]}" for f in fixes if f.label in failed]
    refused = [not_applicable(failed[f.label]) for f in fixes if f.label in failed]
    if why and all(refused):
        return MeasuredSaving("needs-code", words, numerics, note=f"not measured: {refused[0]}")
    if why:
        return MeasuredSaving("failed", words, numerics, note="; ".join(why))
    if any(f.label in left_out for f in fixes):
        return MeasuredSaving(
            "no-time", words, numerics, note="not measured: --verify-budget ran out"
        )
    return MeasuredSaving("no-time", words, numerics, note="not measured")


def _judged(tried: list[ArmFigures], words: str, numerics: str, partial: str) -> MeasuredSaving:
    """The verdict of the candidates that were measured (fastest first)."""
    if max(t.runs for t in tried) < MIN_RUNS:
        return _inconclusive(tried, words, numerics)
    best = next((t for t in tried if helps(t)), tried[0])
    unsettled = [t for t in tried if t.verdict == "inconclusive"]
    if not helps(best) and unsettled:  # no candidate can be called no gain yet
        first = unsettled[0]
        note = first.why if len(tried) == 1 else f"{first.label}: {first.why}"
        return MeasuredSaving("inconclusive", words, numerics, first, tuple(tried), note)
    status: Status = "measured" if helps(best) else "no-gain"
    fix = best.label if status == "measured" else words
    return MeasuredSaving(status, fix, numerics, best, tuple(tried), partial)


def _inconclusive(tried: list[ArmFigures], words: str, numerics: str) -> MeasuredSaving:
    """Too few runs for a verdict: within one run the steps agree, yet fresh runs of one script
    drift (on a busy 2-core machine the same arm's runs differed by 1.5x), so one run per side
    can neither prescribe a fix nor call it useless."""
    best = tried[0]
    note = (
        f"inconclusive: {best.runs} run each side before --verify-budget ran out, too few to tell "
        "the fix from run-to-run drift; a larger --verify-budget measures more rounds"
    )
    return MeasuredSaving("inconclusive", words, numerics, best, tuple(tried), note=note)


def not_applicable(why: str) -> str:
    """What a refused run said (its fix cannot be applied to what the script does), from
    NOT_APPLICABLE on; "" for a run that failed otherwise."""
    at = why.find(NOT_APPLICABLE)
    return why[at:] if at >= 0 else ""


def _partial(fixes: list[Fix], failed: dict[str, str]) -> str:
    bad = [f"{f.label} failed ({failed[f.label]})" for f in fixes if f.label in failed]
    return "; ".join(bad)


def needs_code() -> MeasuredSaving:
    """A fix that needs an edit to the script: it keeps its estimate."""
    return MeasuredSaving("needs-code", "", note="not measured: needs a code change")
