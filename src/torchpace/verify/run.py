"""`doctor --verify`: measure each applicable fix on fresh runs of the user's own script.

Phase 1: the plain script and one arm per fix (worker counts: one arm each) run interleaved by the
measurement core, fixes in order of their finding's estimated saving, within the time budget.
Phase 2: every safe fix that helped (faster outside the noise, the same math) switched on together,
against the plain script again. Every run is a fresh process started the way the user started the
script (same argv, working directory and environment), unprofiled, timing the same window.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Finding, sort_findings
from torchpace.doctor.verification import ArmFigures, MeasuredSaving, Verification
from torchpace.measure import Arm, BaselineFailed, Measured, Settings, measure
from torchpace.measure.load import Probe
from torchpace.measure.process import command_arm
from torchpace.policy.window import check_window
from torchpace.trace.stats import median
from torchpace.verify.appliers import ENV_FIXES, Context, Fix, plan
from torchpace.verify.figures import figures, needs_code, not_applicable, outcome, run_medians

Say = Callable[[str], None]
PHASE_ONE_SHARE = 0.75  # of the budget; the rest measures all safe fixes together
RUN_STEPS_S = 3.0  # timed steps per run take about this long (a slow step gets fewer steps)


@dataclass(frozen=True)
class VerifyOptions:
    """How to verify: the time budget and the window every run times."""

    budget_s: float = 180.0
    warmup: int = 3
    steps: int = 12  # timed per run, in blocks of 4 (verify/child.py)
    rounds: int = 3  # at least, budget permitting
    # At most: a fix still inconclusive gets more rounds while the budget lasts (torchpace.measure).
    max_rounds: int = 8

    def __post_init__(self) -> None:
        check_window(self.warmup, self.steps)
        if self.budget_s <= 0:
            raise ValueError(f"--verify-budget must be positive; got {self.budget_s:g}")
        if self.max_rounds < self.rounds:
            raise ValueError(
                f"max_rounds ({self.max_rounds}) must be at least rounds ({self.rounds})"
            )

    def fitted(self, step_ms: float | None) -> VerifyOptions:
        """The window for steps of `step_ms`: timed steps that take about RUN_STEPS_S, whole
        blocks of 4, no more than asked; a slow step gets 2 warm-up steps, not more."""
        if step_ms is None or step_ms <= 0:
            return self
        blocks = max(1, math.ceil(RUN_STEPS_S * 1000.0 / step_ms / 4))
        steps = min(self.steps, 4 * blocks)
        warmup = (
            min(self.warmup, 2) if step_ms * self.warmup > 1000.0 * RUN_STEPS_S else self.warmup
        )
        return replace(self, steps=steps, warmup=warmup)


ArmMaker = Callable[[str, list[Fix], list[str], float], Arm]


def command_run(name: str, fixes: list[Fix], argv: list[str], timeout: float) -> Arm:
    """The arm of one fix (none: the plain script): a fresh child process per run."""
    env = {ENV_FIXES: json.dumps([f.spec() for f in fixes])}
    return command_arm(name, argv, env=env, timeout_s=timeout)


@dataclass(frozen=True)
class Harness:
    """How --verify runs and times its arms: fresh processes and the real clock; tests give fakes
    (a scripted arm per fix, a fake clock, a probe that records nothing)."""

    arm: ArmMaker = command_run
    clock: Callable[[], float] = time.monotonic
    probe: Probe | None = None


@dataclass(frozen=True)
class _Plan:
    """The fixes to measure, per finding (findings in order of estimated saving)."""

    per_finding: list[tuple[Finding, list[Fix]]]

    def arms(self) -> list[Fix]:
        """Each distinct fix once, in the findings' order."""
        seen: dict[str, Fix] = {}
        for _, fixes in self.per_finding:
            for fix in fixes:
                seen.setdefault(fix.label, fix)
        return list(seen.values())


def verify(
    diagnosis: Diagnosis,
    command: list[str],
    context: Context,
    options: VerifyOptions,
    say: Say | None = None,
    harness: Harness = Harness(),
) -> Diagnosis:
    """The diagnosis with each finding's measured saving and the whole verification filled in.

    `command`: the script as the user ran it, `[SCRIPT, ARGS...]` or `["-m", MODULE, ARGS...]`.
    """
    started = harness.clock()
    options = options.fitted(_unprofiled_ms(diagnosis))
    ordered = sort_findings(list(diagnosis.findings))
    the_plan = _Plan([(f, plan(f, context)) for f in ordered])
    fixes = the_plan.arms()
    if not fixes:
        return _without_runs(diagnosis, ordered, options, harness.clock() - started)
    argv = [sys.executable, "-m", "torchpace.verify.child", *command]
    timeout = max(30.0, options.budget_s / 3)
    arms = [harness.arm("plain script", [], argv, timeout)]
    arms += [harness.arm(f.label, [f], argv, timeout) for f in fixes]
    # All safe fixes together need two of them at least: else phase 1 has the whole budget.
    share = PHASE_ONE_SHARE if sum(1 for f in fixes if not f.numerics) >= 2 else 1.0
    try:
        first = _measure(arms, options, options.budget_s * share, say, harness)
    except BaselineFailed as exc:
        took = harness.clock() - started
        return _baseline_failed(diagnosis, ordered, the_plan, options, took, str(exc))
    base = first.baseline
    measured = {a.name: figures(a.name, a, base) for a in first.arms[1:]}
    failed, left = dict(first.failed), set(first.not_measured)
    results = {
        id(f): outcome(fx, measured, failed, left) if fx else needs_code()
        for f, fx in the_plan.per_finding
    }
    safe = _safe(the_plan, results)
    left_s = options.budget_s - (harness.clock() - started)
    combined, notes = _combined(safe, arms[0], argv, timeout, options, left_s, say, harness)
    verification = _verification(
        diagnosis, first, options, harness.clock() - started, (combined, safe, notes), len(arms)
    )
    findings = tuple(replace(f, measured=results[id(f)]) for f in ordered)
    return replace(diagnosis, findings=findings, verification=verification)


def _verification(
    diagnosis: Diagnosis,
    first: Measured,
    options: VerifyOptions,
    took_s: float,
    together: tuple[ArmFigures | None, list[Fix], list[str]],
    arm_count: int,
) -> Verification:
    """The whole verification: the plain script's spread, the load, the fixes together."""
    combined, safe, notes = together
    base = run_medians(first.arms[0])
    return Verification(
        warmup_steps=options.warmup,
        steps=options.steps,
        rounds=max((len(a.runs) for a in first.arms[1:]), default=0),
        baseline_ms=first.baseline.median_ms,
        baseline_low_ms=min(base),
        baseline_high_ms=max(base),
        profiled_step_ms=diagnosis.breakdown.median_step_ms or None,
        load=first.load.line(),
        load_warning=first.load.warning,
        total_s=took_s,
        budget_s=options.budget_s,
        combined=combined,
        combined_fixes=tuple(f.label for f in safe),
        not_measured=first.not_measured,
        failed=tuple((fix, why) for fix, why in first.failed if not not_applicable(why)),
        notes=(
            *first.notes,
            *_budget_needed(first, options, arm_count),
            *_refused(first.failed),
            *notes,
        ),
    )


def _unprofiled_ms(diagnosis: Diagnosis) -> float | None:
    """The step time a run will see: unprofiled when the doctor timed it, else profiled."""
    c = diagnosis.conditions
    if c is not None and c.unprofiled_step_ms:
        return c.unprofiled_step_ms
    return diagnosis.breakdown.median_step_ms or None


def verify_hint(diagnosis: Diagnosis, script: str) -> Diagnosis:
    """Say which findings --verify could measure on this script (their fixes need no edit)."""
    context = context_of(diagnosis)
    rules = list(dict.fromkeys(f.rule for f in diagnosis.findings if plan(f, context)))
    if not rules:
        return diagnosis
    note = (
        f"--verify measures the fixes of {', '.join(rules)} on this script (fresh unprofiled "
        f"runs, interleaved with the plain script): torchpace doctor --verify {script}"
    )
    return replace(diagnosis, notes=(*diagnosis.notes, note))


def context_of(diagnosis: Diagnosis) -> Context:
    """The run's device, cores and arithmetic, as the plan needs them."""
    from torchpace.cores import usable_cores
    from torchpace.environment.probe import cpu_bf16

    info = diagnosis.info
    cpu = info.device_kind == "cpu"
    return Context(
        device=info.device_kind,
        cores=usable_cores(),
        compute_capability=info.compute_capability,
        cpu_bf16=cpu_bf16() if cpu else None,
    )


def _measure(
    arms: list[Arm],
    options: VerifyOptions,
    budget: float,
    say: Say | None,
    harness: Harness,
    *,
    prime: bool = True,
) -> Measured:
    settings = Settings(
        warmup=options.warmup,
        steps=options.steps,
        repeats=options.rounds,
        max_repeats=options.max_rounds,
        budget_s=budget,
        prime=prime,  # phase 2 runs a script whose files and caches phase 1 has warmed
    )

    def progress(done: int, total: int, what: str) -> None:
        if say is not None:
            say(f"verifying {done}/{total}: {what}")

    return measure(arms, settings, probe=harness.probe, clock=harness.clock, progress=progress)


def _budget_needed(result: Measured, options: VerifyOptions, arms: int) -> list[str]:
    """When fixes were left out: how long a run took and the budget that would measure them all
    (a priming run, `rounds` rounds of every arm, a closing run)."""
    if not result.not_measured:
        return []
    runs = [r.end_s - r.start_s for a in result.arms for r in a.runs]
    run_s = median(runs)
    need = run_s * (2 + options.rounds * arms) / PHASE_ONE_SHARE
    return [
        f"--verify-budget {options.budget_s:g} s ran out: a run of this script took {run_s:.0f} s "
        f"here, so measuring every fix in {options.rounds} rounds needs about {need:.0f} s "
        f"(--verify-budget {60 * math.ceil(need / 60)})"
    ]


def _refused(failed: tuple[tuple[str, str], ...]) -> list[str]:
    """Arms whose fix could not be applied to what the script does: a note, not a failure."""
    return [f"{fix}: {not_applicable(why)}" for fix, why in failed if not_applicable(why)]


def _safe(the_plan: _Plan, results: dict[int, MeasuredSaving]) -> list[Fix]:
    """The best candidate of every finding whose fix helped and keeps the math."""
    safe: dict[str, Fix] = {}
    for finding, fixes in the_plan.per_finding:
        m = results[id(finding)]
        if m.status != "measured" or m.numerics or m.best is None:
            continue
        best = next(f for f in fixes if f.label == m.best.label)
        safe.setdefault(best.label, best)
    return _one_per_setting(list(safe.values()))


def _one_per_setting(fixes: list[Fix]) -> list[Fix]:
    """Two findings' fixes that set the same thing (two worker counts): the first one wins."""
    kept: list[Fix] = []
    taken: set[tuple[str, str]] = set()
    for fix in fixes:
        sets = {(fix.applier, key) for key in fix.params} or {(fix.applier, "")}
        if not sets & taken:
            kept.append(fix)
            taken |= sets
    return kept


def _combined(
    safe: list[Fix],
    baseline: Arm,
    argv: list[str],
    timeout: float,
    options: VerifyOptions,
    left: float,
    say: Say | None,
    harness: Harness,
) -> tuple[ArmFigures | None, list[str]]:
    """All safe fixes that helped, together, against the plain script (when two or more)."""
    if len(safe) < 2:
        return None, []
    if left <= 0:
        return None, ["all safe fixes together: not measured, --verify-budget ran out"]
    label = "all safe fixes together"
    try:
        arms = [baseline, harness.arm(label, safe, argv, timeout)]
        result = _measure(arms, options, left, say, harness, prime=False)
    except BaselineFailed as exc:
        return None, [f"all safe fixes together: not measured ({exc})"]
    if result.failed:
        return None, [f"all safe fixes together failed: {result.failed[0][1]}"]
    if len(result.arms) < 2:
        return None, ["all safe fixes together: not measured, --verify-budget ran out"]
    return figures(label, result.arms[1], result.baseline), list(result.notes)


def _without_runs(
    diagnosis: Diagnosis, ordered: list[Finding], options: VerifyOptions, took: float
) -> Diagnosis:
    findings = tuple(replace(f, measured=needs_code()) for f in ordered)
    verification = _empty(diagnosis, options, took, "no finding has a fix --verify can apply")
    return replace(diagnosis, findings=findings, verification=verification)


def _baseline_failed(
    diagnosis: Diagnosis,
    ordered: list[Finding],
    the_plan: _Plan,
    options: VerifyOptions,
    took: float,
    why: str,
) -> Diagnosis:
    planned = {id(f): bool(fx) for f, fx in the_plan.per_finding}
    note = f"not measured: {why}"
    findings = tuple(
        replace(
            f, measured=MeasuredSaving("failed", "", note=note) if planned[id(f)] else needs_code()
        )
        for f in ordered
    )
    verification = _empty(diagnosis, options, took, why)
    return replace(diagnosis, findings=findings, verification=verification)


def _empty(diagnosis: Diagnosis, options: VerifyOptions, took: float, note: str) -> Verification:
    return Verification(
        warmup_steps=options.warmup,
        steps=options.steps,
        rounds=0,
        baseline_ms=0.0,
        baseline_low_ms=0.0,
        baseline_high_ms=0.0,
        profiled_step_ms=diagnosis.breakdown.median_step_ms or None,
        load="",
        load_warning="",
        total_s=took,
        budget_s=options.budget_s,
        notes=(note,),
    )
