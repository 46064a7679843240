"""What `torchpace doctor --verify` measured: plain data that reporters render beside findings.

A finding the verifier could measure carries a `MeasuredSaving` (Finding.measured); the whole
verification (its window, the machine's load, all safe fixes together, what was left out) is a
`Verification` on the Diagnosis. torchpace.verify fills them; nothing here computes anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# measured: the fix is faster here (outside the noise); no-gain: measured, not faster (slower or
# inside the noise): never prescribed; failed: the fixed run crashed or timed out; no-time: left
# out by --verify-budget; needs-code: the fix needs an edit to the script, so it keeps its estimate.
Status = Literal["measured", "no-gain", "inconclusive", "failed", "no-time", "needs-code"]
Verdict = Literal["faster", "slower", "no-change", "inconclusive"]


@dataclass(frozen=True)
class ArmFigures:
    """One fixed run set against the baseline runs interleaved with it (ms per step).

    Step times are medians over runs of each run's median step; `*_low_ms`/`*_high_ms` are the
    fastest and slowest run. The speedup (baseline / fixed) has a 95% interval.
    """

    label: str  # "num_workers=2", "anomaly detection off"
    baseline_ms: float
    baseline_low_ms: float
    baseline_high_ms: float
    fixed_ms: float
    fixed_low_ms: float
    fixed_high_ms: float
    speedup: float
    speedup_low: float
    speedup_high: float
    verdict: Verdict
    runs: int  # fixed runs measured
    flags: tuple[str, ...] = ()  # implausible results (the measurement was disturbed)
    why: str = ""  # inconclusive: the spread, the load and what would settle it

    @property
    def saving_ms(self) -> float:
        """Per step, at the baseline's step time: baseline - baseline / speedup."""
        return self.baseline_ms - self.baseline_ms / self.speedup

    @property
    def saving_low_ms(self) -> float:
        return self.baseline_ms - self.baseline_ms / self.speedup_low

    @property
    def saving_high_ms(self) -> float:
        return self.baseline_ms - self.baseline_ms / self.speedup_high


@dataclass(frozen=True)
class MeasuredSaving:
    """What --verify found for one finding's fix: the best candidate and every one it tried."""

    status: Status
    fix: str  # what was switched on, in words ("num_workers=2, persistent_workers=True")
    numerics: str = ""  # "" the same math; else what changes (precision, TF32, bitwise order)
    best: ArmFigures | None = None  # the fastest candidate (status measured or no-gain)
    tried: tuple[ArmFigures, ...] = ()  # every candidate measured (worker counts), best first
    note: str = ""  # why it failed, was not measured, or needs a code change

    @property
    def saving_ms(self) -> float | None:
        """The measured saving per step when the fix is faster here; None otherwise."""
        return self.best.saving_ms if self.status == "measured" and self.best else None


@dataclass(frozen=True)
class Verification:
    """The whole verification: how it measured, the load, all safe fixes together, what was left."""

    warmup_steps: int
    steps: int  # timed steps per run, after the warm-up
    rounds: int  # rounds measured (interleaved: baseline, fix, fix, ..., baseline)
    baseline_ms: float  # unprofiled median step of the plain script
    baseline_low_ms: float
    baseline_high_ms: float
    profiled_step_ms: (
        float | None
    )  # the diagnosis's median (profiled) step, for the profiler's cost
    load: str  # one line: cores, other processes' CPU, load average
    load_warning: str  # "" when the machine was quiet enough
    total_s: float  # wall time of the whole verification
    budget_s: float
    combined: ArmFigures | None = None  # every safe fix that helped, switched on together
    combined_fixes: tuple[str, ...] = ()
    not_measured: tuple[str, ...] = ()  # fixes left out for lack of time
    failed: tuple[tuple[str, str], ...] = ()  # (fix, why)
    notes: tuple[str, ...] = ()

    @property
    def profiler_ratio(self) -> float | None:
        """Profiled step / unprofiled step: what the profiler itself cost the diagnosis."""
        if self.profiled_step_ms is None or self.baseline_ms <= 0:
            return None
        return self.profiled_step_ms / self.baseline_ms
