"""Cross-rank passes: adjustments to the findings that only every rank's view together justifies.

Rules judge one trace (or, for rank-imbalance, the ranks' work side by side); a pass runs after
all of them, in doctor/diagnose.py, on multi-rank input only, and changes or withholds findings,
never adds one. Each pass is a named, documented function with its own test (tests/doctor/test_passes.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from torchpace.doctor.facts.ranks import RankWork
from torchpace.doctor.finding import Finding, Severity, Skipped

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


def withhold_waiting_comm(
    findings: list[Finding], works: Sequence[RankWork]
) -> tuple[list[Finding], list[Skipped]]:
    """With no straggler past rank-imbalance's line, a rank's collective finding whose time is
    mostly its wait for a slower rank is no finding: its exposed collective time beyond the rank
    that waits least must be half or more of it, and the slowest rank's extra work must explain
    half that excess or more. HF's run_clm on 2 CPU ranks got comm-overlap on rank 0 (41 ms
    exposed per step against rank 1's 10 ms, rank 1 working 33 ms longer: 18% of the step, under
    the straggler line) on one run and none on the next. DLRM's 8 ranks keep theirs: rank 1 waits
    9.5 ms more than rank 7, but works at most 2.7 ms less than any rank."""
    if any(f.rule == "rank-imbalance" for f in findings) or len(works) < 2:
        return findings, []
    least = min(works, key=lambda w: w.wait_ms)
    slowest = max(works, key=lambda w: w.work_ms)
    by_rank = {w.rank: w for w in works}
    kept: list[Finding] = []
    withheld: dict[str, Skipped] = {}
    for f in findings:
        w = by_rank.get(f.rank) if f.rule in COMM_RULES and f.rank is not None else None
        excess = w.wait_ms - least.wait_ms if w is not None else 0.0
        behind = slowest.work_ms - w.work_ms if w is not None else 0.0
        if w is None or excess < 0.5 * w.wait_ms or behind < 0.5 * excess:
            kept.append(f)
            continue
        withheld.setdefault(
            f.rule,
            Skipped(
                f.rule,
                f"rank {w.rank} waits {w.wait_ms:.1f} ms per step in collectives, {excess:.1f} ms "
                f"more than rank {least.rank}, while rank {slowest.rank} works {behind:.1f} ms "
                "longer: its time there is waiting for a slower rank, not communication",
                "see the per-rank table; a steadier balance (or more steps) would tell",
            ),
        )
    return kept, list(withheld.values())
