"""The measurement policy (docs/measure.md) on synthetic arms and a fake clock: typical steps set
apart and named, rounds added until an interval settles, and "inconclusive" with its advice
instead of a ratio too wide to mean anything."""

from __future__ import annotations

import math

import pytest

from torchpace.measure import Arm, NoProbe, Settings, Timed, Window, measure, stats
from torchpace.trace.outliers import is_outlier, typical

from .synthetic import FakeClock, synthetic_arm


def _drifting(name: str, clock: FakeClock, per_run: list[float], seconds: float = 10.0) -> Arm:
    """Runs whose step time is `per_run[n]` ms (cycled): fresh runs of a script drift."""
    count = [0]

    def run(window: Window) -> Timed:
        ms = per_run[count[0] % len(per_run)]
        count[0] += 1
        clock.advance(seconds)
        return Timed(tuple(ms * (1 + 0.005 * ((i * 3) % 5 - 2)) for i in range(window.steps)))

    return Arm(name, run)


def _measure(arms: list[Arm], clock: FakeClock, settings: Settings):  # type: ignore[no-untyped-def]
    return measure(arms, settings, probe=NoProbe(), clock=clock, cores=2)


def test_rounds_are_added_until_the_interval_settles() -> None:
    clock = FakeClock()
    arms = [_drifting("plain", clock, [100.0]), _drifting("fix", clock, [60.0, 72.0])]
    two = _measure(arms, clock, Settings(warmup=0, steps=8, repeats=2, prime=False)).arm("fix")
    assert two.verdict == "inconclusive" and len(two.runs) == 2
    clock = FakeClock()
    arms = [_drifting("plain", clock, [100.0]), _drifting("fix", clock, [60.0, 72.0])]
    adaptive = Settings(warmup=0, steps=8, repeats=2, max_repeats=10, prime=False)
    fix = _measure(arms, clock, adaptive).arm("fix")
    assert fix.verdict == "faster" and 2 < len(fix.runs) <= 10 and fix.why == ""


def test_only_unsettled_arms_get_more_rounds() -> None:
    clock = FakeClock()
    arms = [
        _drifting("plain", clock, [100.0]),
        _drifting("steady", clock, [50.0]),
        _drifting("drifting", clock, [60.0, 72.0]),
    ]
    adaptive = Settings(warmup=0, steps=8, repeats=2, max_repeats=10, prime=False)
    result = _measure(arms, clock, adaptive)
    assert len(result.arm("steady").runs) == 2
    assert len(result.arm("drifting").runs) > 2


def test_an_interval_too_wide_is_inconclusive_with_the_rounds_and_seconds_to_settle_it() -> None:
    clock = FakeClock()
    arms = [_drifting("plain", clock, [100.0]), _drifting("fix", clock, [80.0, 110.0])]
    settings = Settings(warmup=0, steps=8, repeats=2, max_repeats=4, budget_s=55.0, prime=False)
    fix = _measure(arms, clock, settings).arm("fix")
    assert fix.verdict == "inconclusive" and fix.ratio is not None
    assert not fix.ratio.settled()
    needed = fix.ratio.rounds_to_settle()
    assert needed is not None and needed > len(fix.runs)
    more = needed - len(fix.runs)
    assert fix.why.startswith("inconclusive: run-to-run spread ")
    assert f"on 2 cores; about {more} more rounds (~{more * 20} s) would settle it" in fix.why


def test_a_narrow_interval_around_one_is_no_change_and_a_wide_one_is_not() -> None:
    narrow = stats.Ratio(1.01, 0.97, 1.05, "m")
    wide = stats.Ratio(1.0, 0.5, 2.0, "m")
    assert narrow.verdict() == "no-change" and narrow.settled()
    assert wide.verdict() == "inconclusive" and not wide.settled()
    assert stats.Ratio(0.5, 0.3, 0.9, "m").verdict() == "faster"  # wide, but the sign is known


def test_rounds_to_settle_follow_the_spread_and_the_t_quantile() -> None:
    sd = 0.2
    r = stats.Ratio(1.0, 0.5, 2.0, "m", rounds=2, round_sd=sd, step_half=0.01)
    n = r.rounds_to_settle()
    assert n is not None
    assert stats.t975(n - 1) * sd / math.sqrt(n) <= math.log1p(stats.SETTLE)
    assert stats.t975(n - 2) * sd / math.sqrt(n - 1) > math.log1p(stats.SETTLE)
    hopeless = stats.Ratio(1.0, 0.01, 100.0, "m", rounds=2, round_sd=3.0, step_half=0.01)
    assert hopeless.rounds_to_settle() is None


def test_evaluation_and_checkpoint_steps_are_set_apart() -> None:
    # (ms, waiting for data, batches fetched) against a median step of 100 ms fetching 1 batch
    assert is_outlier(450.0, 100.0, 340.0, 6, 1)  # evaluation: a validation loader inside it
    assert is_outlier(420.0, 100.0, 5.0, 1, 1)  # checkpointing: long, and not waiting for data
    assert not is_outlier(300.0, 100.0, 250.0, 1, 1)  # its own batch was late: steady state
    assert not is_outlier(190.0, 100.0, 0.0, 6, 1)  # not long enough to stand out
    kept, apart = typical([10.0, 11.0, 10.5, 35.0, 9.5])
    assert kept == [10.0, 11.0, 10.5, 9.5] and apart == [(3, "3.3x the median step")]


def test_a_run_with_evaluation_steps_is_compared_on_its_typical_steps() -> None:
    """Each arm's run holds two evaluation-like steps (5x): the ratio is that of the typical
    steps, and the set-apart steps are named per round."""
    clock = FakeClock()

    def arm(name: str, ms: float) -> Arm:
        def run(window: Window) -> Timed:
            clock.advance(1.0)
            steps = [ms * (1 + 0.01 * (i % 3)) for i in range(window.steps)]
            steps[3] = steps[9] = 5 * ms
            return Timed(tuple(steps))

        return Arm(name, run)

    result = _measure([arm("plain", 338.0), arm("workers", 195.0)], clock, Settings(0, 12, 3))
    workers = result.arm("workers")
    assert workers.verdict == "faster" and workers.ratio is not None
    assert workers.ratio.point == pytest.approx(195 / 338, rel=0.02)
    assert len(workers.set_apart) == 6 and workers.set_apart[0].startswith("round 1: step 4 of 12")


def test_identical_noisy_arms_never_read_as_a_change() -> None:
    for seed in range(5):
        clock = FakeClock()
        arms = [synthetic_arm("A", clock, seed=seed), synthetic_arm("B", clock, seed=seed + 10)]
        b = _measure(arms, clock, Settings(warmup=2, steps=30, repeats=3)).arm("B")
        assert b.verdict in ("no-change", "inconclusive"), seed
