"""How far a doctor run's timings can be trusted: the machine's load and the profiler's own cost.

One policy, used by the report header and by the diagnosis: a run counts as noisy when other
processes kept a share of the usable cores busy while it was profiled, or when the profiler made
the steps markedly slower than the same steps unprofiled (it costs per op, so a small model's
step can double). Findings measured from time are then capped at MEDIUM, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from torchpace.doctor.finding import Finding, Severity

# Other processes using a quarter of the usable cores change what the shares of a step measure:
# on the shared 2-core machine the same command gave 0, 2 MEDIUM or 2 HIGH findings with the
# other tenants' load (issue 13).
BUSY_SHARE = 0.25
# Profiled steps this much slower than unprofiled ones: op-heavy phases are inflated more than
# others, so the phase shares are the profiler's as much as the script's.
INFLATION = 1.5


@dataclass(frozen=True)
class RunConditions:
    """The machine and the measurement during a doctor run (None: not measured)."""

    usable_cores: int | None = None
    others_cores: float | None = None  # cores other processes kept busy while profiling
    load_average: float | None = None  # 1-minute load average at the end of the profiled steps
    profiled_step_ms: float | None = None  # mean profiled step, wall time between boundaries
    unprofiled_step_ms: float | None = None  # median of the steps timed without the profiler
    unprofiled_steps: int = 0

    @property
    def inflation(self) -> float | None:
        """Profiled step time over unprofiled step time."""
        if not self.profiled_step_ms or not self.unprofiled_step_ms:
            return None
        return self.profiled_step_ms / self.unprofiled_step_ms

    def busy(self) -> bool:
        """Other processes used at least BUSY_SHARE of the usable cores."""
        if self.others_cores is None or not self.usable_cores:
            return False
        return self.others_cores >= BUSY_SHARE * self.usable_cores

    def reasons(self) -> list[str]:
        """Why the run's timings are noisy, one phrase each; empty when they are not."""
        out = []
        if self.busy():
            out.append(
                f"other processes kept {self.others_cores:.1f} of {self.usable_cores} cores busy"
            )
        inflation = self.inflation
        if inflation is not None and inflation >= INFLATION:
            out.append(f"the profiler made each step {inflation:.1f}x slower")
        return out


def _timed(finding: Finding, live_rules: frozenset[str]) -> bool:
    """Whether a finding's severity rests on measured time (trace rules; live ones with shares)."""
    if finding.rule not in live_rules:
        return True
    return any(k.endswith(("_fraction", "_ms")) for k in finding.evidence)


def cap_noisy(
    findings: Sequence[Finding], conditions: RunConditions, live_rules: frozenset[str]
) -> list[Finding]:
    """Findings measured from time lose HIGH when the run was noisy, and say why."""
    reasons = conditions.reasons()
    if not reasons:
        return list(findings)
    why = " and ".join(reasons)
    out = []
    for f in findings:
        if f.severity is Severity.HIGH and _timed(f, live_rules):
            caveat = (
                f"Measured while {why}: capped at MEDIUM; run again on a quiet machine "
                "(or compare unprofiled timings) before acting on the size of this."
            )
            f = replace(
                f, severity=Severity.MEDIUM, caveat=" ".join(x for x in (f.caveat, caveat) if x)
            )
        out.append(f)
    return out
