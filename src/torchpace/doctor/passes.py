"""Cross-rank passes: adjustments to the findings that only every rank's view together justifies.

Rules judge one trace (or, for rank-imbalance, the ranks' work side by side); a pass runs after
all of them, in doctor/diagnose.py, on multi-rank input only, and changes findings, never adds
one. Each pass is a named, documented function with its own test (tests/doctor/test_passes.py).
"""

from __future__ import annotations

from dataclasses import replace

from torchpace.doctor.finding import Finding, Severity

# The findings about time spent in collectives: on a rank that waits for a straggler, most of
# that time is the wait, not the transfer.
COMM_RULES = ("comm-bound", "comm-overlap")


def demote_waiting_comm(findings: list[Finding], straggler: int) -> list[Finding]:
    """With a straggler found (rank-imbalance fired), the other ranks' collective time is mostly
    waiting for it, not transfer: their comm findings would send the user after the wrong fix, so
    they drop to LOW with no saving and a caveat naming the straggler. The straggler's own comm
    findings, and everything when rank-imbalance did not fire, stay as they are."""
    if not any(f.rule == "rank-imbalance" for f in findings):
        return findings
    out = []
    for f in findings:
        if f.rule in COMM_RULES and f.rank is not None and f.rank != straggler:
            f = replace(
                f,
                severity=Severity.LOW,
                saving_ms=None,
                saving_method="not estimated: this rank mostly waits for the straggler",
                caveat=f"Rank {straggler} is the straggler (see rank-imbalance): this rank's "
                "collective time is mostly waiting for it. Fix the imbalance first.",
            )
        out.append(f)
    return out
