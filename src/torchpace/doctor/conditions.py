"""Findings measured from time, judged by the run's conditions (runner/conditions.py): a noisy run
caps them at MEDIUM and says why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity

if TYPE_CHECKING:
    from torchpace.runner.conditions import RunConditions


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
