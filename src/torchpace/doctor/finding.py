"""Findings: plain data that rules produce and reporters render."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

# Defined with the trace (it reads them from stack frames); re-exported here for the findings.
from torchpace.trace.stacks import SourceLocation

if TYPE_CHECKING:  # only `torchpace doctor --verify` makes one: not imported by analyze
    from torchpace.doctor.verification import MeasuredSaving

# Evidence values are JSON-ready. Every key carries its unit: `step_ms`, `wait_fraction`, `h2d_bytes`.
EvidenceValue: TypeAlias = (
    "int | float | str | bool | list[EvidenceValue] | dict[str, EvidenceValue] | None"
)


class Severity(enum.IntEnum):
    """How much a finding matters; ordered so `--fail-on medium` compares with >=."""

    LOW = 1
    MEDIUM = 2
    HIGH = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        """Parse `low|medium|high` (any case); ValueError naming the choices otherwise."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown severity {text!r}; choose one of: low, medium, high"
            ) from None


@dataclass(frozen=True)
class Finding:
    """One thing that slows training down, with its evidence, estimated saving and fix."""

    rule: str
    severity: Severity
    summary: str  # one sentence, with numbers
    evidence: Mapping[str, EvidenceValue]
    fix: str  # code or a precise instruction
    saving_ms: float | None = None  # estimated saving per step; None when no estimate is honest
    # saving_ms over the median step it was judged against: set by the severity policy
    # (doctor/severity.py), which the severity follows; None without a saving or a step.
    saving_fraction: float | None = None
    # How saving_ms was estimated, in one line; the rule's doc page has the details.
    saving_method: str = ""
    locations: tuple[SourceLocation, ...] = ()
    rank: int | None = None  # the rank whose trace showed it (multi-rank analyses)
    caveat: str = ""  # what the rule cannot be sure of
    # What `doctor --verify` measured for this finding's fix; None when it was not verified.
    measured: MeasuredSaving | None = None
    # Its figures are counts or ratios of CPU times, which other processes' load does not change
    # (padding's share of tokens; a CPU loader's share of the thread's CPU time): a noisy run
    # does not cap it (doctor/conditions.py), so its verdict is the same on a busy machine.
    load_proof: bool = False
    # How much more other processes' load stretched the step than this finding's own work, where
    # the rule judged its share so (registry.judged_so: measured at fewer torch threads, or the
    # step over the step without the training thread's wait for a core): the severity policy
    # then judges the saving's share times this, as the caveat says.
    stretch: float = 1.0

    def sort_key(self) -> tuple[float, int, str]:
        """Largest saving first, then severity, then rule name (stable, deterministic)."""
        saving = self.saving_ms if self.saving_ms is not None else -1.0
        return (-saving, -int(self.severity), self.rule)


@dataclass(frozen=True)
class Skipped:
    """A rule that could not run on this input, and what would let it run."""

    rule: str
    reason: str
    enable: str = ""  # e.g. "torch.profiler.profile(record_shapes=True)"


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Order findings for reports: by estimated saving, then severity."""
    return sorted(findings, key=Finding.sort_key)


__all__ = [
    "EvidenceValue",
    "Finding",
    "Severity",
    "Skipped",
    "SourceLocation",
    "sort_findings",
]
