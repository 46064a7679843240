"""The one measurement core: arms run interleaved, each compared with the baseline beside it.

Schedule: round r runs the baseline, then every other arm (B A1 A2 ... B A1 A2 ... B), and one more
baseline run closes the last round, so every arm run sits between two baseline runs. Each arm run
is compared with the baseline interpolated (geometrically) to the moment it ran: a machine that
slows down steadily while it measures shifts both sides alike. Same warm-up and steps for every
arm. Results: a ratio with a 95% interval per arm (torchpace.measure.stats), a verdict that calls
a change inside the noise "no measurable change", flags for implausible results, and the
machine's load over the runs with a warning when it was too busy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from torchpace.measure import stats
from torchpace.measure.arms import Arm, Expect, Timed, Window
from torchpace.measure.load import LoadSample, LoadSummary, MachineProbe, Probe, summarise
from torchpace.policy.window import check_window
from torchpace.trace.outliers import typical

Progress = Callable[[int, int, str], None]


class BaselineFailed(RuntimeError):
    """The baseline arm raised: nothing can be compared with it."""


@dataclass(frozen=True)
class Settings:
    """How to measure: the same window for every arm, rounds, an optional time budget."""

    warmup: int = 3
    steps: int = 30
    repeats: int = 3  # rounds of the interleaved schedule, at least
    budget_s: float | None = None  # arms and rounds that would not fit are left out, and said so
    min_effect: float = stats.MIN_EFFECT
    seed: int = 0
    # Run the baseline once, unrecorded, before round 0: the first run of a process pays one-off
    # costs (thread pools, allocator growth, lazy imports, a cold disk cache) no other run pays.
    prime: bool = True
    # Rounds at most: past `repeats`, rounds of the arms still inconclusive are added until their
    # intervals settle, the budget ends or this many rounds ran (None: exactly `repeats`).
    max_repeats: int | None = None
    settle: float = stats.SETTLE  # an interval within +-this of its ratio is settled

    def __post_init__(self) -> None:
        check_window(self.warmup, self.steps)
        if self.repeats < 1:
            raise ValueError(f"repeats must be at least 1, got {self.repeats}")
        if self.budget_s is not None and self.budget_s <= 0:
            raise ValueError(f"budget_s must be positive, got {self.budget_s}")
        if self.max_repeats is not None and self.max_repeats < self.repeats:
            raise ValueError(
                f"max_repeats ({self.max_repeats}) must be at least repeats ({self.repeats})"
            )

    @property
    def rounds_at_most(self) -> int:
        return self.repeats if self.max_repeats is None else self.max_repeats


@dataclass(frozen=True)
class Run:
    """One run of one arm: when it ran, what it measured, how busy the machine was."""

    arm: str
    round: int
    start_s: float
    end_s: float
    timed: Timed
    load: LoadSample

    @property
    def mid_s(self) -> float:
        return (self.start_s + self.end_s) / 2


@dataclass(frozen=True)
class ArmResult:
    """One arm against the baseline: per-run medians, the ratio with its interval, the verdict."""

    name: str
    runs: tuple[Run, ...]
    median_ms: float  # median over runs of each run's median cost (ms per step or per unit)
    ratio: stats.Ratio | None  # None for the baseline itself
    verdict: stats.Verdict
    flags: tuple[str, ...] = ()
    # Steps of its runs left out of the typical ones (trace/outliers.py): "round 2: 1 of 12
    # steps (3.4x the median step ...)"
    set_apart: tuple[str, ...] = ()
    why: str = ""  # for an inconclusive verdict: the spread, the load and what would settle it

    @property
    def spread(self) -> float:
        """(slowest - fastest run median) / median: how much the runs of this arm disagree."""
        medians = [stats.median(r.timed.costs()) for r in self.runs]
        return (max(medians) - min(medians)) / self.median_ms if self.median_ms > 0 else 0.0


@dataclass(frozen=True)
class Measured:
    """A whole measurement: every arm's result (the baseline first), the load and what was left out."""

    settings: Settings
    arms: tuple[ArmResult, ...]
    load: LoadSummary
    failed: tuple[tuple[str, str], ...] = ()  # (arm, why)
    not_measured: tuple[str, ...] = ()  # arms left out for lack of time
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def baseline(self) -> ArmResult:
        return self.arms[0]

    def arm(self, name: str) -> ArmResult:
        """An arm's result by name (KeyError naming the measured arms otherwise)."""
        for result in self.arms:
            if result.name == name:
                return result
        raise KeyError(
            f"no measured arm {name!r}; measured: {', '.join(a.name for a in self.arms)}"
        )


def measure(
    arms: Sequence[Arm],
    settings: Settings,
    *,
    probe: Probe | None = None,
    clock: Callable[[], float] = time.monotonic,
    progress: Progress | None = None,
    cores: int | None = None,
) -> Measured:
    """Run `arms` interleaved (the first is the baseline) and compare each with the baseline.

    Arms after the first are in priority order: under a time budget the last ones are left out.
    """
    if len(arms) < 1:
        raise ValueError("measure() needs at least the baseline arm")
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise ValueError(f"arm names must be unique; got {names}")
    schedule = _Schedule(arms, settings, probe or MachineProbe(clock), clock, progress)
    schedule.run_all()
    return schedule.result(cores)


class _Schedule:
    """The interleaved rounds, the budget and the failures of one measure() call."""

    def __init__(
        self,
        arms: Sequence[Arm],
        settings: Settings,
        probe: Probe,
        clock: Callable[[], float],
        progress: Progress | None,
    ) -> None:
        self.base, self.others = arms[0], list(arms[1:])
        self.settings, self.probe, self.clock, self.progress = settings, probe, clock, progress
        self.runs: list[Run] = []
        self.failed: dict[str, str] = {}
        self.not_measured: list[str] = []
        self.notes: list[str] = []
        self.t0 = clock()
        self.done = 0
        self.total = settings.repeats * len(arms) + (1 if self.others else 0)

    # complex: the rounds' schedule (first round, adaptive rounds, the time budget) in one loop.
    def run_all(self) -> None:
        s = self.settings
        if s.prime:
            self._prime()
        for r in range(s.rounds_at_most):
            left = {*self.failed, *self.not_measured}
            active = [a for a in self.others if a.name not in left]
            if r == 0:
                self._once(self.base, r)
                self._first_round(active)
                continue
            if r >= s.repeats:  # adaptive: only the arms whose interval has not settled
                active = [a for a in active if self._result(a).verdict == "inconclusive"]
                if not active:
                    break
                self.total += len(active) + 1
            if not self._fits(len(active) + 2):  # this round, plus the closing baseline
                if r < s.repeats:
                    self.notes.append(f"time budget: {r} of {s.repeats} rounds measured")
                break
            for arm in [self.base, *active]:
                self._once(arm, r)
        if self.others and any(run.arm != self.base.name for run in self.runs):
            self._once(self.base, max(run.round for run in self.runs) + 1)  # closes the last round

    def _result(self, arm: Arm) -> ArmResult:
        base = [r for r in self.runs if r.arm == self.base.name]
        return _arm_result(arm, [r for r in self.runs if r.arm == arm.name], base, self.settings)

    def _prime(self) -> None:
        if self.progress:
            self.progress(0, self.total, f"priming: {self.base.name} (not recorded)")
        try:
            self.base.run(Window(self.settings.warmup, self.settings.steps, -1))
        except Exception as exc:
            why = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
            raise BaselineFailed(f"the baseline {self.base.name!r} failed: {why}") from exc

    def _first_round(self, active: list[Arm]) -> None:
        """Round 0: arms in priority order while the budget lasts."""
        for i, arm in enumerate(active):
            if not self._fits(2):  # this arm, plus the closing baseline
                self.not_measured = [a.name for a in active[i:]]
                return
            self._once(arm, 0)

    def _fits(self, runs: int) -> bool:
        """Whether `runs` more runs of the usual length fit in the budget."""
        budget = self.settings.budget_s
        if budget is None or not self.runs:
            return True
        typical = stats.median([r.end_s - r.start_s for r in self.runs])
        return (self.clock() - self.t0) + runs * typical <= budget

    def _once(self, arm: Arm, round_: int) -> None:
        if arm.name in self.failed:
            return
        self.done += 1
        if self.progress:
            self.progress(self.done, self.total, f"round {round_ + 1}: {arm.name}")
        window = Window(self.settings.warmup, self.settings.steps, round_)
        self.probe.start()
        start = self.clock()
        try:
            timed = arm.run(window)
        except Exception as exc:  # one broken arm must not lose the others
            self.probe.stop()
            why = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
            if arm is self.base:
                raise BaselineFailed(f"the baseline {arm.name!r} failed: {why}") from exc
            self.failed[arm.name] = why
            return
        end = self.clock()
        self.runs.append(Run(arm.name, round_, start, end, timed, self.probe.stop()))

    def result(self, cores: int | None) -> Measured:
        base_runs = [r for r in self.runs if r.arm == self.base.name]
        load = summarise([r.load for r in self.runs], cores)
        results = [_baseline_result(self.base.name, base_runs)]
        for arm in self.others:
            mine = [r for r in self.runs if r.arm == arm.name]
            if mine and arm.name not in self.failed:
                result = _arm_result(arm, mine, base_runs, self.settings)
                if result.verdict == "inconclusive" and result.ratio is not None:
                    seconds = _round_s(mine) + _round_s(base_runs)
                    why = inconclusive(result.ratio, load, seconds, self.settings.settle)
                    result = replace(result, why=why)
                results.append(result)
        return Measured(
            settings=self.settings,
            arms=tuple(results),
            load=load,
            failed=tuple(self.failed.items()),
            not_measured=tuple(self.not_measured),
            notes=tuple(self.notes),
        )


def _round_s(runs: Sequence[Run]) -> float:
    """The typical length of one run (s)."""
    return stats.median([r.end_s - r.start_s for r in runs])


def inconclusive(ratio: stats.Ratio, load: LoadSummary, round_s: float, settle: float) -> str:
    """Why an interval says nothing yet, and what would settle it, in one sentence."""
    if ratio.round_sd is not None:
        spread = f"run-to-run spread {math.expm1(ratio.round_sd):.0%}"
    else:
        spread = f"step-to-step spread {math.expm1(ratio.step_half):.0%} in one round"
    where = f" at load {load.load_avg_1m:.1f}" if load.load_avg_1m is not None else ""
    rounds = ratio.rounds_to_settle(settle)
    if rounds is None:
        more = (
            f"more than {stats.MAX_ROUNDS} rounds would be needed to settle it: measure on a "
            "quieter machine"
        )
    else:
        extra = rounds - ratio.rounds
        more = f"about {extra} more round{'s' * (extra != 1)} (~{extra * round_s:.0f} s) would settle it"
    return f"inconclusive: {spread}{where} on {load.cores} cores; {more}"


def _typical(run: Run) -> list[float]:
    """The run's typical costs: steps the typical-step rule sets apart are left out."""
    return typical(run.timed.costs())[0]


def _median_cost(runs: Sequence[Run]) -> float:
    return stats.median([stats.median(_typical(r)) for r in runs])


def _baseline_result(name: str, runs: list[Run]) -> ArmResult:
    return ArmResult(name, tuple(runs), _median_cost(runs), None, "no-change")


def _bracket(run: Run, base_runs: Sequence[Run]) -> tuple[Run, Run | None]:
    """The baseline runs just before and just after `run` (None after: the schedule was cut)."""
    before = max((b for b in base_runs if b.mid_s <= run.mid_s), key=lambda b: b.mid_s)
    after = [b for b in base_runs if b.mid_s > run.mid_s]
    return before, (min(after, key=lambda b: b.mid_s) if after else None)


def _reference(run: Run, before: Run, after: Run | None) -> tuple[float, list[float]]:
    """Log of the baseline median interpolated to when `run` ran, and the bracketing steps."""
    low = math.log(stats.median(_typical(before)))
    if after is None:
        return low, _typical(before)
    high = math.log(stats.median(_typical(after)))
    span = after.mid_s - before.mid_s
    w = (run.mid_s - before.mid_s) / span if span > 0 else 0.5
    return low + w * (high - low), _typical(before) + _typical(after)


def _arm_result(arm: Arm, runs: list[Run], base_runs: list[Run], settings: Settings) -> ArmResult:
    refs: list[float] = []
    rounds: list[tuple[list[float], list[float]]] = []
    for run in runs:
        ref, base_steps = _reference(run, *_bracket(run, base_runs))
        refs.append(ref)
        rounds.append((base_steps, _typical(run)))
    ratio = stats.ratio(rounds, refs, seed=settings.seed)
    verdict = ratio.verdict(settings.min_effect, settings.settle)
    flags = plausibility(ratio, arm.expect)
    return ArmResult(
        arm.name, tuple(runs), _median_cost(runs), ratio, verdict, flags, _set_apart(runs)
    )


def _set_apart(runs: Sequence[Run]) -> tuple[str, ...]:
    """The steps of each run left out of its typical ones, named."""
    out = []
    for run in runs:
        costs = run.timed.costs()
        for i, why in typical(costs)[1]:
            out.append(f"round {run.round + 1}: step {i + 1} of {len(costs)} ({why})")
    return tuple(out)


def plausibility(ratio: stats.Ratio, expect: Expect) -> tuple[str, ...]:
    """Flags for a result the change cannot produce: the measurement was disturbed."""
    why = f" ({expect.why})" if expect.why else ""
    flags = []
    if expect.cost_only and ratio.high < 1.0:
        flags.append(
            f"implausible: measured {ratio.speedup:.2f}x faster, but this change can only add "
            f"time{why}; the machine was disturbed while it measured"
        )
    if expect.max_speedup is not None and ratio.speedup_low > expect.max_speedup:
        flags.append(
            f"implausible: at least {ratio.speedup_low:.2f}x, above the {expect.max_speedup:g}x "
            f"this change can give here{why}; the baseline runs were likely disturbed"
        )
    return tuple(flags)
