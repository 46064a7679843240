"""Figures no real run produces: a finding that holds one is withheld, and the report says why.

The trace layer drops durations that cannot be real (negative, longer than a day) and reads
durations under a nanosecond as 0 ms; what is left can still not add up (a kernel that runs
300 times longer than the steps around it makes "fp32 time per step" 50x the step). A rule's
arithmetic on such figures gives a fraction above 1 or a number that is not finite: printed as a
finding, it would be read as a measurement. Such a finding becomes a Skipped entry naming the
figure, so the report shows that the trace could not be judged there.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

from torchpace.doctor.finding import EvidenceValue, Finding, Skipped

# Evidence values are rounded to 3-4 decimals: a fraction of exactly 1 may come out a hair above.
_SLACK = 1e-6
ENABLE = "check the trace's durations (a range far longer than its step?), or re-record it"


def withhold(findings: list[Finding]) -> tuple[list[Finding], list[Skipped]]:
    """The findings whose figures can be true, and one Skipped per rule for the others."""
    kept: list[Finding] = []
    withheld: dict[str, Skipped] = {}
    for finding in findings:
        why = impossible(finding)
        if why is None:
            kept.append(finding)
        elif finding.rule not in withheld:
            reason = f"its figures cannot be true ({why}): the trace's durations do not add up"
            withheld[finding.rule] = Skipped(finding.rule, reason, ENABLE)
    return kept, list(withheld.values())


def impossible(finding: Finding) -> str | None:
    """What makes the finding's figures impossible, in words; None when nothing does."""
    saving = finding.saving_ms
    if saving is not None and not (math.isfinite(saving) and saving >= 0):
        return f"saving_ms is {saving:.3g}"
    for key, value in _numbers(finding.evidence):
        if not math.isfinite(value):
            return f"{key} is {value}"
        if key.endswith("fraction") and not -_SLACK <= value <= 1 + _SLACK:
            return f"{key} is {value:.3g}, a fraction outside 0-1"
    return None


def _numbers(evidence: Mapping[str, EvidenceValue]) -> Iterator[tuple[str, float]]:
    """Every number in the evidence with the key it is under (a list's items: the list's key)."""
    for name, value in evidence.items():
        yield from _values(value, name)


def _values(value: EvidenceValue, key: str) -> Iterator[tuple[str, float]]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield key, float(value)
    elif isinstance(value, list):
        for item in value:
            yield from _values(item, key)
    elif isinstance(value, Mapping):
        yield from _numbers(value)
