"""The interleaved measurement core on synthetic arms and a fake clock: schedule, verdicts, flags."""

from __future__ import annotations

import pytest

from torchpace.measure import Arm, BaselineFailed, Expect, NoProbe, Settings, Timed, Window, measure
from torchpace.measure.load import LoadSample, summarise

from .synthetic import FakeClock, failing_arm, fixed_arm, synthetic_arm

SETTINGS = Settings(warmup=2, steps=30, repeats=4)


def _measure(arms: list[Arm], clock: FakeClock, settings: Settings = SETTINGS):  # type: ignore[no-untyped-def]
    return measure(arms, settings, probe=NoProbe(), clock=clock, cores=2)


def test_identical_arms_are_no_measurable_change_under_drift() -> None:
    clock = FakeClock()
    result = _measure([synthetic_arm("A", clock), synthetic_arm("B", clock)], clock)
    b = result.arm("B")
    assert b.verdict == "no-change"
    assert b.ratio is not None and b.ratio.low <= 1.0 <= b.ratio.high


def test_a_planted_20_percent_slowdown_is_detected_under_drift() -> None:
    clock = FakeClock()
    arms = [synthetic_arm("A", clock), synthetic_arm("B", clock, factor=1.2)]
    b = _measure(arms, clock).arm("B")
    assert b.verdict == "slower" and b.ratio is not None
    assert 1.1 < b.ratio.point < 1.3 and b.ratio.low > 1.0


def test_schedule_interleaves_and_closes_with_a_baseline() -> None:
    clock = FakeClock()
    order: list[str] = []

    def arm(name: str) -> Arm:
        def run(window: Window) -> Timed:
            order.append(name)
            clock.advance(1.0)
            assert (window.warmup, window.steps) == (2, 30)  # the same window for every arm
            return Timed((10.0,) * window.steps)

        return Arm(name, run)

    _measure([arm("A"), arm("B"), arm("C")], clock, Settings(warmup=2, steps=30, repeats=2))
    # A priming run of the baseline first (a process's first run pays one-off costs), unrecorded.
    assert order == ["A", "A", "B", "C", "A", "B", "C", "A"]


def test_a_speedup_from_a_cost_only_change_is_flagged() -> None:
    clock = FakeClock()
    why = Expect(cost_only=True, why="recomputes activations")
    arms = [synthetic_arm("A", clock), synthetic_arm("ckpt", clock, factor=0.5, expect=why)]
    ckpt = _measure(arms, clock).arm("ckpt")
    assert ckpt.verdict == "faster"
    (flag,) = ckpt.flags
    assert "implausible" in flag and "can only add time" in flag and "recomputes" in flag


def test_a_speedup_beyond_what_the_hardware_gives_is_flagged() -> None:
    clock = FakeClock()
    cap = Expect(max_speedup=4.0, why="bf16 over fp32 peak on this CPU")
    arms = [synthetic_arm("A", clock), synthetic_arm("amp", clock, factor=1 / 17.9, expect=cap)]
    (flag,) = _measure(arms, clock).arm("amp").flags
    assert "above the 4x" in flag
    clock = FakeClock()
    plausible = [synthetic_arm("A", clock), synthetic_arm("amp", clock, factor=0.6, expect=cap)]
    assert _measure(plausible, clock).arm("amp").flags == ()


def test_a_failing_arm_is_reported_and_the_others_kept() -> None:
    clock = FakeClock()
    arms = [synthetic_arm("A", clock), failing_arm("broken", clock), synthetic_arm("B", clock)]
    result = _measure(arms, clock)
    assert [a.name for a in result.arms] == ["A", "B"]
    assert result.failed == (("broken", "RuntimeError: this configuration cannot run here"),)
    with pytest.raises(BaselineFailed, match="the baseline 'broken' failed: RuntimeError"):
        _measure([failing_arm("broken", clock), synthetic_arm("B", clock)], clock)


def test_the_budget_leaves_out_the_lowest_priority_arms_and_says_so() -> None:
    clock = FakeClock()
    arms = [fixed_arm(n, clock, 10.0) for n in ("base", "first", "second", "third")]
    result = _measure(
        arms, clock, Settings(warmup=0, steps=3, repeats=3, budget_s=45.0, prime=False)
    )
    assert [a.name for a in result.arms] == ["base", "first", "second"]
    assert result.not_measured == ("third",)
    assert result.notes == ("time budget: 1 of 3 rounds measured",)
    assert clock.now <= 45.0


def test_runs_carry_their_load_and_a_busy_machine_is_warned_about() -> None:
    quiet = summarise([LoadSample(1.0, 0.5, 0.1)] * 3, cores=2)
    assert not quiet.busy and quiet.warning == ""
    busy = summarise([LoadSample(1.0, 4.0, 1.5), LoadSample(1.0, 4.0, 1.2)], cores=2)
    assert busy.busy and "too busy to measure" in busy.warning and "1.4 of 2 cores" in busy.warning
    assert "other processes used 1.4 cores" in busy.line()
    bursts = summarise([LoadSample(1.0, 1.0, 0.0)] * 6 + [LoadSample(1.0, 3.0, 1.3)] * 2, cores=2)
    assert bursts.busy and "during 2 of 8 runs" in bursts.warning
    no_proc = summarise([LoadSample(1.0, 3.5, None)], cores=2)
    assert no_proc.busy and "load average was 3.5" in no_proc.warning


def test_units_per_step_compare_work_not_steps() -> None:
    clock = FakeClock()

    def arm(name: str, ms: float, units: float) -> Arm:
        def run(window: Window) -> Timed:
            clock.advance(1.0)
            return Timed((ms,) * window.steps, units=(units,) * window.steps)

        return Arm(name, run)

    # Twice the time per step but four times the tokens: twice as fast per token.
    result = _measure([arm("fixed", 10.0, 100.0), arm("bucketed", 20.0, 400.0)], clock)
    bucketed = result.arm("bucketed")
    assert bucketed.ratio is not None and bucketed.ratio.point == pytest.approx(0.5)
    assert bucketed.verdict == "faster"


def test_bad_settings_and_arms_are_refused() -> None:
    with pytest.raises(ValueError, match="repeats must be at least 1, got 0"):
        Settings(repeats=0)
    with pytest.raises(ValueError, match="budget_s must be positive"):
        Settings(budget_s=0)
    clock = FakeClock()
    with pytest.raises(ValueError, match="unique"):
        _measure([fixed_arm("a", clock, 1.0), fixed_arm("a", clock, 1.0)], clock)
    with pytest.raises(ValueError, match="at least one measured step"):
        Timed(())
