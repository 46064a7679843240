"""The statistics of "is B faster than A": ratios of medians with 95% intervals, and the verdict.

Two sources of noise, two intervals, and the report keeps the wider of them (their hull):
- between runs (a shared machine drifts: another job starts, the CPU clocks down): a Student-t
  interval on the log of per-run median ratios, one ratio per round of interleaved runs;
- within runs (step-to-step jitter): a bootstrap of the median ratio, steps resampled inside each
  run, never across runs (a run's steps share its conditions).
With one round only the bootstrap exists, which cannot see drift: results say which method made
them. Medians, not means: one step stalled by another process must not move the answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

# The one median of torchpace (pure Python, no numpy needed to import it).
from torchpace.trace.stats import median

Verdict = Literal["faster", "slower", "no-change", "inconclusive"]  # worded by report/verified.py
# Two-sided 95% Student-t quantiles t(0.975, df) (any statistics table); a df between two rows
# takes the smaller df's row, which is the wider interval.
_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980,
}  # fmt: skip
_Z975 = 1.960
# Below this relative change a difference is called "no measurable change" even when the
# interval excludes 1: a 1% gain cannot be told from a change of machine state between runs.
MIN_EFFECT = 0.03
# An interval that holds 1 says "no measurable change" only when it is narrow: within +-10% of its
# ratio (a change that large would have been seen). Wider, it says nothing either way:
# "inconclusive", with the rounds that would settle it. 10% is what the doctor's estimates and a
# technique's typical gain are (docs/measure.md).
SETTLE = 0.10
MAX_ROUNDS = 50  # beyond this many rounds, "more rounds" is no advice: the machine is too noisy


def t975(df: int) -> float:
    """The two-sided 95% Student-t quantile for `df` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    rows = [d for d in _T975 if d <= df]
    return _T975[max(rows)] if df <= max(_T975) else _Z975


@dataclass(frozen=True)
class Ratio:
    """A time ratio `after / before` (below 1: faster) with its 95% interval."""

    point: float
    low: float
    high: float
    method: str  # how the interval was made, in a few words
    rounds: int = 1  # paired rounds it was measured over
    # Standard deviation of the per-round log ratios (run-to-run drift); None below 2 rounds.
    round_sd: float | None = None
    step_half: float = 0.0  # half-width (log) of the bootstrap over steps within runs

    @property
    def speedup(self) -> float:
        """before / after: above 1 is faster."""
        return 1.0 / self.point

    @property
    def speedup_low(self) -> float:
        return 1.0 / self.high

    @property
    def speedup_high(self) -> float:
        return 1.0 / self.low

    @property
    def half_width(self) -> float:
        """The wider half of the interval, in log units (0.095 is +-10%)."""
        return max(math.log(self.high / self.point), math.log(self.point / self.low))

    def settled(self, settle: float = SETTLE) -> bool:
        """Whether the interval is narrow enough to call a change inside it negligible."""
        return self.half_width <= math.log1p(settle)

    def verdict(self, min_effect: float = MIN_EFFECT, settle: float = SETTLE) -> Verdict:
        """Faster or slower when the interval excludes 1 and the change is not negligible; no
        change when it holds 1 within +-`settle`; inconclusive when it is wider than that."""
        if self.high < 1.0 and self.point <= 1.0 / (1.0 + min_effect):
            return "faster"
        if self.low > 1.0 and self.point >= 1.0 + min_effect:
            return "slower"
        return "no-change" if self.settled(settle) else "inconclusive"

    def rounds_to_settle(self, settle: float = SETTLE) -> int | None:
        """About how many rounds in all would narrow the interval to +-`settle`; None: more than
        MAX_ROUNDS. Both halves shrink as 1/sqrt(rounds): the t-interval (with its quantile) on
        the run-to-run spread measured so far, and the bootstrap over steps."""
        target = math.log1p(settle)
        for n in range(max(self.rounds, 2), MAX_ROUNDS + 1):
            drift = 0.0 if self.round_sd is None else t975(n - 1) * self.round_sd / math.sqrt(n)
            steps = self.step_half * math.sqrt(self.rounds / n)
            if max(drift, steps) <= target:
                return n
        return None


def round_sd(log_ratios: Sequence[float]) -> float | None:
    """Standard deviation of per-round log ratios; None below 2 rounds."""
    n = len(log_ratios)
    if n < 2:
        return None
    mean = sum(log_ratios) / n
    return math.sqrt(sum((x - mean) ** 2 for x in log_ratios) / (n - 1))


def paired_interval(log_ratios: Sequence[float]) -> tuple[float, float, float] | None:
    """Geometric-mean ratio and its t-interval from per-round log ratios; None below 2 rounds."""
    sd = round_sd(log_ratios)
    if sd is None:
        return None
    n = len(log_ratios)
    mean = sum(log_ratios) / n
    half = t975(n - 1) * sd / math.sqrt(n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def _resampled_medians(
    samples: Sequence[float], draws: int, rng: np.random.Generator
) -> np.ndarray:
    values = np.asarray(samples, dtype=float)
    picks = rng.integers(0, len(values), size=(draws, len(values)))
    return np.asarray(np.median(values[picks], axis=1))


def bootstrap_interval(
    rounds: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    draws: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """95% percentile interval of the geometric-mean median ratio, resampling steps within runs.

    `rounds` holds, per round, (baseline steps, arm steps). Deterministic for a given seed.
    """
    rng = np.random.default_rng(seed)
    logs = np.zeros(draws)
    for before, after in rounds:
        if not before or not after:
            raise ValueError("every round needs at least one step on each side")
        logs += np.log(_resampled_medians(after, draws, rng))
        logs -= np.log(_resampled_medians(before, draws, rng))
    logs /= len(rounds)
    low, high = np.percentile(logs, [2.5, 97.5])
    return math.exp(float(low)), math.exp(float(high))


def ratio(
    rounds: Sequence[tuple[Sequence[float], Sequence[float]]],
    reference_logs: Sequence[float] | None = None,
    *,
    draws: int = 1000,
    seed: int = 0,
) -> Ratio:
    """The time ratio arm / baseline over interleaved rounds, with the hull of both intervals.

    Args:
        rounds: per round, (baseline steps, arm steps), in the same unit.
        reference_logs: per round, log of the baseline median to compare with (the baseline
            interpolated to when the arm ran); None: the median of that round's baseline steps.
    """
    if not rounds:
        raise ValueError("a ratio needs at least one round of measurements")
    refs = reference_logs or [math.log(median(b)) for b, _ in rounds]
    logs = [math.log(median(a)) - ref for (_, a), ref in zip(rounds, refs, strict=True)]
    point = math.exp(sum(logs) / len(logs))
    low, high = bootstrap_interval(rounds, draws=draws, seed=seed)
    step_half = max(math.log(high / point), math.log(point / low), 0.0)
    paired = paired_interval(logs)
    sd = round_sd(logs)
    if paired is None:
        method = "bootstrap of step medians within one run per side (run-to-run drift not seen)"
        return Ratio(point, min(low, point), max(high, point), method, 1, None, step_half)
    method = (
        f"hull of a t-interval over {len(logs)} paired rounds and a bootstrap of steps within runs"
    )
    low, high = min(low, paired[1], point), max(high, paired[2], point)
    return Ratio(point, low, high, method, len(logs), sd, step_half)


@dataclass(frozen=True)
class Change:
    """How one quantity (a step time, a phase, a kernel) moved from BEFORE to AFTER, in ms."""

    before_ms: float
    after_ms: float
    delta_ms: float  # after - before (medians)
    delta_low_ms: float
    delta_high_ms: float
    verdict: Verdict
    # Why a change outside the noise is still "no-change": "negligible" (under min_effect of
    # the scale) or "few samples"; "" otherwise.
    reason: str = ""

    @property
    def ratio(self) -> float | None:
        return self.after_ms / self.before_ms if self.before_ms > 0 else None


def change(
    before: Sequence[float],
    after: Sequence[float],
    *,
    scale_ms: float | None = None,
    min_effect: float = MIN_EFFECT,
    settle: float = SETTLE,
    min_samples: int = 2,
    draws: int = 1000,
    seed: int = 0,
) -> Change:
    """The difference of medians after - before with a bootstrap 95% interval, and its verdict.

    `scale_ms` is what "negligible" is relative to (a phase against the whole step); by default
    the before median. A change is faster/slower when the interval excludes 0 and the change is
    at least `min_effect` of the scale; fewer than `min_samples` on a side never decide; an
    interval that holds 0 is "no-change" when it spans no more than +-`settle` of the scale, else
    "inconclusive".
    """
    if not before or not after:
        raise ValueError("a change needs at least one sample on each side")
    b, a = median(before), median(after)
    rng = np.random.default_rng(seed)
    diffs = _resampled_medians(after, draws, rng) - _resampled_medians(before, draws, rng)
    low, high = (float(x) for x in np.percentile(diffs, [2.5, 97.5]))
    low, high = min(low, a - b), max(high, a - b)
    scale = scale_ms if scale_ms is not None else b
    outside = high < 0 or low > 0
    if min(len(before), len(after)) < min_samples:
        return Change(b, a, a - b, low, high, "no-change", "few samples" if outside else "")
    if outside and abs(a - b) < min_effect * scale:
        return Change(b, a, a - b, low, high, "no-change", "negligible")
    if outside:
        return Change(b, a, a - b, low, high, "faster" if high < 0 else "slower")
    wide = (high - low) / 2 > settle * scale
    return Change(b, a, a - b, low, high, "inconclusive" if wide else "no-change")
