"""The one severity policy: how much a finding matters follows from its saving's share of the step.

Stated for users in docs/severity.md. The diagnosis engine applies `judge` to every finding after the
rules ran, so a rule's own severity is only a proposal: it counts where no saving was estimated.

- With an estimate: HIGH from HIGH_FRACTION of the median step, MEDIUM from MEDIUM_FRACTION, else
  LOW. Nothing is HIGH below a tenth of the step, whatever the rule proposed. A share the rule
  judged beside other processes' load, with what the load stretched taken out of the step
  (`Finding.stretch`), is judged so here too: the load stretched the rest of the step.
- Without one (saving_ms is None): a trace finding keeps its rule's severity but at most MEDIUM
  (a trace has the numbers; a rule that cannot estimate from them cannot call it HIGH). A live
  finding (a setting seen in the running script: flags, loaders, the model) keeps its rule's
  severity; its rule's page says why (e.g. anomaly detection left on slows every step by a factor).
- Figures are checked first: a saving that is negative or not a number is dropped, one larger than
  the step is cut to the step, and either is said in the finding's caveat.
"""

from __future__ import annotations

import math
from dataclasses import replace

from torchpace.doctor.finding import Finding, Severity

# A tenth of every step is worth acting on first; a few percent is still worth a look; below that a
# fix is within the run-to-run noise of a GPU step.
HIGH_FRACTION = 0.10
MEDIUM_FRACTION = 0.03
UNESTIMATED_CAP = Severity.MEDIUM


def severity_of(saving_fraction: float) -> Severity:
    """The severity of a saving worth `saving_fraction` (0..1) of the median step."""
    if saving_fraction >= HIGH_FRACTION:
        return Severity.HIGH
    if saving_fraction >= MEDIUM_FRACTION:
        return Severity.MEDIUM
    return Severity.LOW


def judge(finding: Finding, step_ms: float, *, live: bool = False) -> Finding:
    """The finding with sane figures, its saving's share of the step and the policy's severity.

    Args:
        step_ms: the median step its saving is measured against (its rank's).
        live: whether a live rule (input "live") produced it.
    """
    finding = _sane(finding, step_ms)
    saving = finding.saving_ms
    fraction = saving / step_ms if saving is not None and step_ms > 0 else None
    if fraction is not None:
        # Judged with the load's stretch taken out (registry.judged_so): the step without it.
        severity = severity_of(min(1.0, fraction * finding.stretch))
    elif live:
        severity = finding.severity
    else:
        severity = min(finding.severity, UNESTIMATED_CAP)
    return replace(finding, severity=severity, saving_fraction=fraction)


def _sane(finding: Finding, step_ms: float) -> Finding:
    """Drop a saving that cannot be true, cut one larger than the step; say so in the caveat."""
    saving = finding.saving_ms
    if saving is None:
        return finding
    if not math.isfinite(saving) or saving < 0:
        return _noted(
            replace(
                finding, saving_ms=None, saving_method=f"not estimated ({finding.saving_method})"
            ),
            f"The rule's saving estimate ({saving} ms) is not a valid duration, so none is shown.",
        )
    if step_ms > 0 and saving > step_ms:
        return _noted(
            replace(finding, saving_ms=step_ms),
            f"The estimate ({saving:.1f} ms) exceeded the {step_ms:.1f} ms median step and was cut "
            "to the step: the trace's figures disagree (overlapping or misrecorded events?).",
        )
    return finding


def _noted(finding: Finding, note: str) -> Finding:
    caveat = f"{finding.caveat} {note}" if finding.caveat else note
    return replace(finding, caveat=caveat)
