"""The statistics of the measurement core, on deterministic synthetic samples (never wall time)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpace.measure import stats


def _samples(seed: int, n: int = 30, ms: float = 20.0, jitter: float = 0.05) -> list[float]:
    rng = random.Random(seed)
    return [ms * math.exp(rng.gauss(0.0, jitter)) * (3.0 if rng.random() < 0.05 else 1.0)
            for _ in range(n)]  # fmt: skip


def _rounds(factor: float, seed: int, repeats: int = 3) -> list[tuple[list[float], list[float]]]:
    return [
        (_samples(seed * 100 + r), [x * factor for x in _samples(seed * 100 + 50 + r)])
        for r in range(repeats)
    ]


@pytest.mark.parametrize("seed", range(10))
def test_identical_arms_are_no_measurable_change(seed: int) -> None:
    r = stats.ratio(_rounds(1.0, seed))
    assert r.low <= 1.0 <= r.high
    assert r.verdict() == "no-change"


@pytest.mark.parametrize("seed", range(10))
def test_a_planted_20_percent_slowdown_is_detected(seed: int) -> None:
    r = stats.ratio(_rounds(1.2, seed))
    assert r.verdict() == "slower"
    assert 1.0 < r.low <= r.point <= r.high
    assert 1.1 < r.point < 1.3


def test_a_planted_speedup_is_faster_and_its_speedup_interval_inverts() -> None:
    r = stats.ratio(_rounds(1 / 1.5, 3))
    assert r.verdict() == "faster"
    assert r.speedup_low <= r.speedup <= r.speedup_high
    assert r.speedup_low == pytest.approx(1 / r.high)


def test_one_round_uses_only_the_bootstrap_and_says_so() -> None:
    r = stats.ratio(_rounds(1.2, 1, repeats=1))
    assert "drift not seen" in r.method
    assert r.verdict() == "slower"


def test_a_tiny_real_change_is_still_no_measurable_change() -> None:
    # Noise-free: the interval excludes 1, but 1% is below what a shared machine can tell apart.
    rounds = [([10.0] * 5, [10.1] * 5)] * 3
    r = stats.ratio(rounds)
    assert r.low > 1.0 and r.verdict() == "no-change"
    assert r.verdict(min_effect=0.005) == "slower"


def test_t_quantiles_take_the_wider_row_between_table_rows() -> None:
    assert stats.t975(2) == pytest.approx(4.303)
    assert stats.t975(11) == stats.t975(10)
    assert stats.t975(1000) == pytest.approx(1.96)
    with pytest.raises(ValueError, match="at least 1"):
        stats.t975(0)


def test_drift_between_rounds_widens_the_interval() -> None:
    steady = stats.ratio([([10.0, 10.2, 9.8], [12.0, 12.2, 11.8])] * 3)
    drifting = stats.ratio(
        [([10.0, 10.2, 9.8], [12.0 * k, 12.2 * k, 11.8 * k]) for k in (0.85, 1.0, 1.15)]
    )
    assert drifting.high - drifting.low > steady.high - steady.low


@settings(max_examples=30, deadline=None)
@given(st.floats(0.25, 4.0), st.integers(0, 1000))
def test_scaling_one_arm_scales_the_ratio(factor: float, seed: int) -> None:
    base = stats.ratio(_rounds(1.0, seed % 7), seed=seed)
    scaled = stats.ratio(_rounds(factor, seed % 7), seed=seed)
    assert scaled.point == pytest.approx(base.point * factor, rel=1e-9)
    assert scaled.low == pytest.approx(base.low * factor, rel=1e-6)


def test_change_of_identical_samples_is_no_change_and_of_a_shift_is_slower() -> None:
    same = stats.change(_samples(1), _samples(2))
    assert same.verdict == "no-change" and same.delta_low_ms <= 0 <= same.delta_high_ms
    slower = stats.change(_samples(1), [x + 5.0 for x in _samples(2)])
    assert slower.verdict == "slower" and slower.delta_low_ms > 0


def test_change_is_negligible_against_its_scale_and_undecided_with_few_samples() -> None:
    phase = stats.change([1.0] * 10, [1.5] * 10, scale_ms=100.0)  # 0.5 ms of a 100 ms step
    assert phase.verdict == "no-change"
    assert stats.change([1.0] * 10, [1.5] * 10).verdict == "slower"
    few = stats.change([1.0], [2.0, 2.0])  # one step decides nothing
    assert few.verdict == "no-change" and few.reason == "few samples"
    assert stats.change([1.0] * 10, [1.01] * 10).reason == "negligible"


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one round"):
        stats.ratio([])
    with pytest.raises(ValueError, match="at least one step"):
        stats.bootstrap_interval([([], [1.0])])
    with pytest.raises(ValueError, match="at least one sample"):
        stats.change([], [1.0])
