"""How far a doctor run's timings can be trusted: the machine's load and the profiler's own cost.

Measured by the runner; one policy, read by the report header and by the diagnosis
(doctor/conditions.py caps the findings measured from time): a run counts as noisy when other
processes kept a share of the usable cores busy while it was profiled, or when the profiler made
the steps markedly slower than the same steps unprofiled (it costs per op, so a small model's
step can double). Findings measured from time are then capped at MEDIUM, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torchpace.trace.stats import median

# Other processes using a quarter of the usable cores change what the shares of a step measure:
# on the shared 2-core machine the same command gave 0, 2 MEDIUM or 2 HIGH findings with the
# other tenants' load (issue 13).
BUSY_SHARE = 0.25
# Profiled steps this much slower than unprofiled ones: op-heavy phases are inflated more than
# others, so the phase shares are the profiler's as much as the script's.
INFLATION = 1.5
# The profiler's cost is stated only from agreeing figures: at least this many unprofiled steps,
# their interquartile range within this share of their median (a run whose load changed midway
# gave 0.46x and 1.86x for the same command), and a profiled step no faster than this share of an
# unprofiled one (the profiler only adds work: below it, the ratio measures the machine).
MIN_UNPROFILED = 3
MAX_SPREAD = 0.5
FLOOR = 0.9


@dataclass(frozen=True)
class RunConditions:
    """The machine and the measurement during a doctor run (None: not measured)."""

    usable_cores: int | None = None
    others_cores: float | None = None  # cores other processes kept busy while profiling
    load_average: float | None = None  # 1-minute load average at the end of the profiled steps
    profiled_step_ms: float | None = None  # median profiled step, wall time between boundaries
    unprofiled_step_ms: float | None = None  # median of the steps timed without the profiler
    unprofiled_steps: int = 0
    cost_unmeasured: str = ""  # why the profiler's cost is not stated ("" when it is)
    # The training thread's time ready to run but waiting for a core other processes held, per
    # profiled step (Linux's schedstat): what the machine's load added to the step.
    ready_ms_per_step: float | None = None

    @property
    def inflation(self) -> float | None:
        """Profiled step time over unprofiled step time; None when not measured."""
        if self.cost_unmeasured or not self.profiled_step_ms or not self.unprofiled_step_ms:
            return None
        return self.profiled_step_ms / self.unprofiled_step_ms

    def busy(self) -> bool:
        """Other processes used at least BUSY_SHARE of the usable cores."""
        if self.others_cores is None or not self.usable_cores:
            return False
        return self.others_cores >= BUSY_SHARE * self.usable_cores

    def load(self) -> str:
        """The others' load, in words ("" when not measured)."""
        if self.others_cores is None or not self.usable_cores:
            return ""
        return f"other processes kept {self.others_cores:.1f} of {self.usable_cores} cores busy"

    def reasons(self) -> list[str]:
        """Why the run's timings are noisy, one phrase each; empty when they are not."""
        out = []
        if self.busy():
            out.append(self.load())
        inflation = self.inflation
        if inflation is not None and inflation >= INFLATION:
            out.append(f"the profiler made each step {inflation:.1f}x slower")
        return out


def profiler_cost(
    profiled_ms: Sequence[float], unprofiled_ms: Sequence[float]
) -> tuple[float | None, float | None, str]:
    """(median profiled step, median unprofiled step, why the cost is not stated or "")."""
    import statistics  # only the doctor gets here: `analyze` starts without it

    prof = median(profiled_ms) if profiled_ms else None
    if len(unprofiled_ms) < MIN_UNPROFILED or prof is None:
        return (
            prof,
            None,
            (
                f"the script ended before {MIN_UNPROFILED} unprofiled steps could be timed "
                f"({len(unprofiled_ms)} were)"
            ),
        )
    q1, mid, q3 = statistics.quantiles(unprofiled_ms, n=4, method="inclusive")
    if mid <= 0:
        return prof, None, "the unprofiled steps took no measurable time"
    if len(profiled_ms) >= MIN_UNPROFILED:
        p1, pmid, p3 = statistics.quantiles(profiled_ms, n=4, method="inclusive")
        if pmid > 0 and (p3 - p1) / pmid > MAX_SPREAD:
            # The same ops ran 4x slower in some profiled steps than in others (other
            # processes' load): a ratio of medians would call that the profiler's cost.
            return (
                prof,
                mid,
                (
                    f"the {len(profiled_ms)} profiled steps varied too much ({_ms(min(profiled_ms))}-"
                    f"{_ms(max(profiled_ms))}) to compare"
                ),
            )
    if (q3 - q1) / mid > MAX_SPREAD:
        low, high = min(unprofiled_ms), max(unprofiled_ms)
        return (
            prof,
            mid,
            (
                f"the {len(unprofiled_ms)} unprofiled steps varied too much "
                f"({_ms(low)}-{_ms(high)}) to compare"
            ),
        )
    if prof < FLOOR * mid:
        return (
            prof,
            mid,
            (
                f"the unprofiled steps ({_ms(mid)}) were slower than the profiled ones "
                f"({_ms(prof)}): the machine's load changed during the run"
            ),
        )
    return prof, mid, ""


def _ms(x: float) -> str:
    return f"{x:,.0f} ms" if x >= 100 else f"{x:.3g} ms"
