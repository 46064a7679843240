"""How reports word findings: evidence with units, the saving against its baseline, the verdict.

One rule's findings on several ranks are shown once, for the rank with the largest saving, with
the other ranks listed: eight ranks stalling on the same loader is one thing to fix, not eight.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Finding, Severity, sort_findings
from torchpace.report import units, verified
from torchpace.report.facts import findings_title, saving


@dataclass(frozen=True)
class FindingView:
    """A finding's wording, ready to lay out."""

    title: str  # "dataloader-stall (rank 1)"
    severity: str  # "high"
    summary: str
    evidence: list[tuple[str, str]]
    saving: str  # the estimate with its baseline and environment, or why there is none
    fix: str
    locations: list[str]
    caveat: str
    also: str = ""  # "Also on ranks 0, 2-3 (estimated saving 40.1 to 58.2 ms per step)"
    measured: str = ""  # what `doctor --verify` measured ("" when not verified)
    prescribed: bool = True  # False: --verify measured the fix and it did not help here


def views(diagnosis: Diagnosis) -> list[FindingView]:
    """The findings to show, largest saving first, one per rule across ranks."""
    return [finding_view(group[0], diagnosis, others=group[1:]) for group in groups(diagnosis)]


def groups(diagnosis: Diagnosis) -> list[list[Finding]]:
    """Findings in report order; a rule's findings on several ranks form one group, best first."""
    by_rule: dict[str, list[Finding]] = {}
    ordered: list[list[Finding]] = []
    for finding in sort_findings(list(diagnosis.findings)):
        if finding.rank is None:
            ordered.append([finding])
        elif finding.rule in by_rule:
            by_rule[finding.rule].append(finding)
        else:
            by_rule[finding.rule] = [finding]
            ordered.append(by_rule[finding.rule])
    return ordered


def finding_view(
    finding: Finding, diagnosis: Diagnosis, *, others: list[Finding] | None = None
) -> FindingView:
    """Word one finding: evidence with units, the saving against its baseline, where it happens."""
    title = finding.rule if finding.rank is None else f"{finding.rule} (rank {finding.rank})"
    evidence = [(k, units.evidence_value(k, v)) for k, v in finding.evidence.items()]
    shown = [f"{loc} ({loc.count}x)" if loc.count else str(loc) for loc in finding.locations]
    locations = list(dict.fromkeys(shown))  # a place named once (3 modules' forwards at one line)
    return FindingView(
        title=title,
        severity=finding.severity.label,
        summary=finding.summary,
        evidence=evidence,
        saving=saving(finding, diagnosis),
        fix=finding.fix.strip("\n"),
        locations=locations,
        caveat=finding.caveat,
        also=also(others or []),
        measured=verified.measured(finding),
        prescribed=verified.prescribed(finding),
    )


def also(others: list[Finding]) -> str:
    """The other ranks where the same rule fired, with the range of their savings."""
    if not others:
        return ""
    ranks = rank_ranges(sorted(f.rank for f in others if f.rank is not None))
    savings = [f.saving_ms for f in others if f.saving_ms is not None]
    text = f"Also on rank{'s' if len(others) > 1 else ''} {ranks}"
    if not savings:
        return text
    low, high = units.ms(min(savings)), units.ms(max(savings))
    spread = low if low == high else f"{low} to {high}"
    return f"{text} (estimated saving {spread} per step)"


def rank_ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    parts: list[str] = []
    start = prev = None
    for rank in [*ranks, None]:
        if prev is not None and rank == prev + 1:
            prev = rank
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = rank
    return ", ".join(parts)


def title(diagnosis: Diagnosis) -> str:
    """The findings section's title, counting a rule's findings across ranks once."""
    total, shown = len(diagnosis.findings), len(groups(diagnosis))
    if total == shown:
        return findings_title(diagnosis)
    return f"Findings ({shown}; {total} across ranks), largest estimated saving first"


def verdict(diagnosis: Diagnosis) -> str:
    """One sentence: how many findings of each severity, and the largest estimated saving; first,
    why the profiled window is short, when it is."""
    caveat = f"{diagnosis.caveat[0].upper()}{diagnosis.caveat[1:]}. " if diagnosis.caveat else ""
    return caveat + _count(diagnosis)


def _count(diagnosis: Diagnosis) -> str:
    # One per cause: a rule's findings on several ranks count once (the findings section lists
    # them as one, "Also on ranks ...").
    found = [group[0] for group in groups(diagnosis)]
    if not found:
        return "No findings: no rule found anything that slows these steps."
    counts = Counter(f.severity for f in found)
    by_severity = ", ".join(f"{counts[s]} {s.label}" for s in reversed(Severity) if counts[s])
    total = len(diagnosis.findings)
    across = f"; {total} across ranks" if total > len(found) else ""
    text = f"{len(found)} finding{'s' if len(found) > 1 else ''} ({by_severity}{across})."
    best = sort_findings(list(found))[0]
    if best.saving_ms is None:
        return text
    fraction = best.saving_fraction
    share = f" ({units.share(fraction)} of the step)" if fraction is not None else ""
    return f"{text} Largest estimated saving: {best.rule}, about {units.ms(best.saving_ms)} per step{share}."
