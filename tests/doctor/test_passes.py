"""The cross-rank pass: a straggler's waiting peers do not get comm findings at full weight."""

from __future__ import annotations

from pathlib import Path

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.passes import demote_waiting_comm
from torchpace.trace import load_traces

STRAGGLER = Path(__file__).parents[1] / "fixtures/traces/ddp_gloo_2rank/straggler_data"


def _finding(rule: str, rank: int, saving: float = 10.0) -> Finding:
    return Finding(
        rule=rule,
        severity=Severity.HIGH,
        summary="s",
        evidence={},
        fix="f",
        saving_ms=saving,
        saving_method="m",
        rank=rank,
    )


def test_waiting_ranks_comm_findings_lose_severity_and_saving() -> None:
    found = [
        _finding("rank-imbalance", 1),
        _finding("comm-bound", 0),
        _finding("comm-overlap", 0),
        _finding("comm-bound", 1),  # the straggler's own
        _finding("dataloader-stall", 0),  # not about collectives
    ]
    out = demote_waiting_comm(found, straggler=1)
    assert [f.rule for f in out] == [f.rule for f in found]  # nothing added, dropped or moved
    demoted = out[1:3]
    assert all(f.severity is Severity.LOW and f.saving_ms is None for f in demoted)
    assert all("Rank 1 is the straggler" in f.caveat for f in demoted)
    assert out[0] is found[0] and out[3] is found[3] and out[4] is found[4]


def test_without_rank_imbalance_nothing_changes() -> None:
    found = [_finding("comm-bound", 0), _finding("comm-overlap", 1)]
    assert demote_waiting_comm(found, straggler=1) == found


def test_the_engine_runs_the_pass_on_a_recorded_straggler() -> None:
    """Two gloo ranks, rank 1 loading slowly (PROVENANCE.md): rank 0's collective time is waiting."""
    diagnosis = diagnose(load_traces(STRAGGLER))
    assert any(f.rule == "rank-imbalance" for f in diagnosis.findings)
    slowest = diagnosis.slowest_rank
    others = [f for f in diagnosis.findings if f.rule.startswith("comm-") and f.rank != slowest]
    assert others, "the recorded straggler run shows comm findings on the waiting rank"
    assert all(f.saving_ms is None and "straggler" in f.caveat for f in others)
