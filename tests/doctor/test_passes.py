"""The policy pipeline (doctor/passes.py): a straggler's waiting peers do not get comm findings at full
weight, and a recording's measures apply inside the engine."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.facts.ranks import RankWork
from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.passes import (
    demote_waiting_comm,
    withhold_comm_beyond_least_waiting,
    withhold_waiting_comm,
)
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


def _work(rank: int, step: float, wait: float, work: float) -> RankWork:
    return RankWork(rank, step, wait, 1.0, None, "", step_work_ms=(work,))


def test_a_rank_waiting_for_a_slower_rank_under_the_straggler_line_gets_no_comm_finding() -> None:
    # HF run_clm, 2 CPU gloo ranks under the doctor (figures as measured): rank 0 waited 41.3 ms
    # per step in collectives, rank 1 10.3 ms; rank 1 worked 33 ms longer (18% of the step).
    works = [_work(0, 183.3, 41.3, 139.4), _work(1, 185.1, 10.3, 172.4)]
    kept, skipped = withhold_waiting_comm(
        [_finding("comm-overlap", 0), _finding("gpu-idle", 0)], works
    )
    assert [f.rule for f in kept] == ["gpu-idle"]
    (why,) = skipped
    assert why.rule == "comm-overlap" and "waiting for a slower rank" in why.reason
    assert "31.0 ms more than rank 1" in why.reason and "rank 1 works 33.0 ms longer" in why.reason


def test_collective_time_no_slower_rank_explains_stays() -> None:
    # DLRM-like: rank 1 waits 9.5 ms more than rank 7, but no rank works more than 2.7 ms longer.
    works = [_work(1, 19.9, 11.06, 8.85), _work(7, 12.5, 1.58, 10.93), _work(5, 17.8, 6.2, 11.59)]
    found = [_finding("comm-bound", 1), _finding("comm-overlap", 1)]
    assert withhold_waiting_comm(found, works) == (found, [])
    # With a straggler named, the demotion pass speaks for the waiting ranks instead.
    imbalance = [_finding("rank-imbalance", 5), _finding("comm-overlap", 1)]
    slow = [_work(1, 20.0, 15.0, 5.0), _work(5, 20.0, 0.5, 19.5)]
    assert withhold_waiting_comm(imbalance, slow) == (imbalance, [])


def test_the_engine_applies_a_recordings_measures_after_the_severity_policy() -> None:
    # The same recorded ranks, as the doctor's own recording of a busy, short run: every policy
    # runs inside the engine (passes.apply_policies), none after it returns.
    from torchpace.doctor.recording import Recording
    from torchpace.runner.conditions import RunConditions

    traces = load_traces(STRAGGLER)
    plain = diagnose(traces)
    busy = RunConditions(usable_cores=2, others_cores=2.0)
    noisy = diagnose(traces, recording=Recording("train.py", conditions=busy))
    high = [f for f in plain.findings if f.severity is Severity.HIGH]
    assert high  # else nothing below could fail
    assert all(f.severity is not Severity.HIGH for f in noisy.findings)
    assert noisy.script == "train.py" and noisy.conditions is busy
    short = diagnose(traces, recording=Recording("train.py", caveat="2 of 10: why", short=True))
    assert short.findings == ()  # every finding here is a trace rule's, from step time
    assert {s.rule for s in short.skipped} >= {f.rule for f in plain.findings}
    assert short.caveat == "2 of 10: why"


LOADED_TUTORIAL = Path(__file__).parents[1] / "fixtures/traces/ddp_tutorial_2rank_loaded"


def test_a_busy_hosts_gloo_collectives_and_same_work_straggler_are_not_judged() -> None:
    # The DDP tutorial's 2 gloo ranks beside two busy loops: rank 1 did the same work more slowly
    # and rank 0 spent 38% of its step in collectives; on a quiet machine neither finding fires
    # (PROVENANCE.md). Recorded while others kept the cores busy, both are listed as not judged.
    from torchpace.doctor.recording import Recording
    from torchpace.runner.conditions import RunConditions

    traces = load_traces(LOADED_TUTORIAL)
    plain = {f.rule: f for f in diagnose(traces).findings}
    assert set(plain) == {"rank-imbalance", "comm-bound"}
    assert plain["rank-imbalance"].evidence["cause"] == "same work"
    assert plain["comm-bound"].evidence["backend_name"] == "gloo"

    quiet = RunConditions(usable_cores=2, others_cores=0.1)
    kept = diagnose(traces, recording=Recording("t.py", conditions=quiet))
    assert {f.rule for f in kept.findings} == set(plain)

    busy = RunConditions(usable_cores=2, others_cores=1.2)
    loaded = diagnose(traces, recording=Recording("t.py", conditions=busy))
    assert loaded.findings == ()
    why = {s.rule: s.reason for s in loaded.skipped}
    assert "other processes kept 1.2 of 2 cores busy" in why["rank-imbalance"]
    assert "gloo's collectives run on CPU threads" in why["comm-bound"]


SHARED = Path(__file__).parents[1] / "fixtures/traces/ddp_tutorial_2rank_shared"


def test_ranks_that_fill_their_hosts_cores_get_no_timing_verdict_between_them() -> None:
    # Two quiet runs of the DDP tutorial's 2 gloo ranks on 2 cores gave comm-bound HIGH and a
    # same-work straggler HIGH, a third nothing (PROVENANCE.md): the ranks' own threads fill
    # the cores. As the doctor's recording of 2 ranks on 2 cores, both are not judged; with 4
    # cores the same traces are judged as found.
    from torchpace.doctor.recording import Recording
    from torchpace.runner.conditions import RunConditions

    for run, rules in (
        ("comm_bound", {"comm-bound"}),
        ("straggler", {"rank-imbalance", "comm-bound"}),
    ):
        traces = load_traces(SHARED / run)
        assert {f.rule for f in diagnose(traces).findings} == rules
        quiet = RunConditions(usable_cores=2, others_cores=0.0)
        shared = diagnose(traces, recording=Recording("t.py", conditions=quiet, ranks_here=2))
        assert shared.findings == ()
        why = {s.rule: s.reason for s in shared.skipped}
        assert all(why[r].startswith("2 ranks shared 2 cores") for r in rules), why
        assert all(
            "a core or more of its own" in s.enable for s in shared.skipped if s.rule in rules
        )
        roomy = RunConditions(usable_cores=4, others_cores=0.0)
        kept = diagnose(traces, recording=Recording("t.py", conditions=roomy, ranks_here=2))
        assert {f.rule for f in kept.findings} == rules


def test_a_busy_host_keeps_a_straggler_with_its_own_cause() -> None:
    # rank 1's DataLoader is slower (ddp_gloo_2rank/straggler_data): not what a busy host does
    # to one rank, so the straggler stays, capped at MEDIUM with the load named.
    from torchpace.doctor.recording import Recording
    from torchpace.runner.conditions import RunConditions

    busy = RunConditions(usable_cores=2, others_cores=1.2)
    found = diagnose(load_traces(STRAGGLER), recording=Recording("t.py", conditions=busy))
    imbalance = [f for f in found.findings if f.rule == "rank-imbalance"]
    assert imbalance and imbalance[0].evidence["cause"] == "data loading"


def test_a_gloo_comm_finding_stays_when_the_rank_that_waits_least_has_it_too() -> None:
    gloo = {"backend_name": "gloo"}
    works = [_work(0, 20.0, 6.0, 14.0), _work(1, 20.0, 8.0, 12.0)]
    both = [replace(_finding("comm-bound", r), evidence=gloo) for r in (0, 1)]
    assert withhold_comm_beyond_least_waiting(both, works) == (both, [])
    # Only on the rank that waits more: withheld, with the least-waiting rank named.
    kept, (why,) = withhold_comm_beyond_least_waiting(both[1:], works)
    assert kept == [] and why.reason.startswith("rank 0 waits least in collectives (6.0 ms")
    # NCCL's waits follow the work (DLRM's corpus ranks): judged as found.
    nccl = [replace(both[1], evidence={"backend_name": "nccl"})]
    assert withhold_comm_beyond_least_waiting(nccl, works) == (nccl, [])
