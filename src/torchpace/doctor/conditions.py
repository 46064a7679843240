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
    if finding.load_proof:
        return False
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


def straggler_is_load(finding: Finding, ready_ms: dict[int, float]) -> str:
    """Why a rank-imbalance finding measured the machine's load, not the training's balance;
    "" when it did not. `ready_ms`: each rank's run-queue wait per profiled step (the time its
    training thread was ready but other processes held the cores; runner/conditions.py).

    On a busy machine one rank gets less CPU than another and "works" longer: the same CPU PPO
    run got a rank-imbalance finding under load and none on a quiet machine. When the
    straggler's extra run-queue wait covers half its extra work or more, the gap is load."""
    slow, gap = finding.rank, finding.evidence.get("work_spread_ms")
    if finding.rule != "rank-imbalance" or slow not in ready_ms or len(ready_ms) < 2:
        return ""
    if not isinstance(gap, (int, float)) or gap <= 0:
        return ""
    excess = ready_ms[slow] - min(ms for rank, ms in ready_ms.items() if rank != slow)
    if excess < 0.5 * gap:
        return ""
    return (
        f"rank {slow} worked {gap:.1f} ms per step longer than the fastest rank and waited "
        f"{excess:.1f} ms per step longer for a CPU core that other processes held: the "
        "machine's load, not the training's balance"
    )


# The findings about time spent in collectives: on a rank that waits for another (a straggler, or
# one held back by the machine's load), most of that time is the wait, not the transfer.
COMM_RULES = ("comm-bound", "comm-overlap")


def on_gloo(finding: Finding) -> bool:
    """A collective finding measured on gloo, whose collectives run on CPU threads."""
    return str(finding.evidence.get("backend_name", "")).lower() == "gloo"


def _host_paced(finding: Finding) -> str:
    """What of a cross-rank finding the host's scheduling sets: "gloo" (its collectives run on
    CPU threads), "same" (a rank doing the same recorded work more slowly), else ""."""
    if finding.rule in COMM_RULES and on_gloo(finding):
        return "gloo"
    if finding.rule == "rank-imbalance" and finding.evidence.get("cause") == "same work":
        return "same"
    return ""


def slowed_by_busy_host(finding: Finding, conditions: RunConditions | None) -> str:
    """Why a cross-rank finding measured a busy machine, not the job; "" when it did not.

    Two kinds of finding read the host's load on every rank alike, where `straggler_is_load`
    and `waiting_is_load` (one rank held back more than another) do not see it. gloo runs each
    collective on CPU threads: beside two busy loops, HF's run_clm and accelerate's nlp_example (2
    CPU ranks) exposed 10% of their steps in collectives against 5-6% on a quiet machine, crossing
    comm-overlap's line. And a rank doing the same recorded work more slowly is what a busy host
    does: the DDP tutorial's rank 1 worked 1.81 ms per step against rank 0's 1.07 beside the
    loops, 1.72 against 1.66 without them."""
    if conditions is None or not conditions.busy():
        return ""
    kind, load = _host_paced(finding), conditions.load()
    if kind == "gloo":
        return f"measured while {load}: gloo's collectives run on CPU threads that this load slows"
    if kind == "same":
        return (
            f"measured while {load}: a rank doing the same work more slowly is what a busy host "
            "does to one rank more than another"
        )
    return ""


def sharing_cores(finding: Finding, conditions: RunConditions | None, ranks_here: int) -> str:
    """Why a cross-rank finding measured ranks that share their host's cores, quiet or not; ""
    when it did not (fewer `ranks_here` than usable cores).

    The DDP tutorial's 2 gloo ranks on 2 cores, quiet (load average 0.7-0.8, others 0.0 cores),
    gave three verdicts in three runs: nothing; comm-bound HIGH (an all-reduce of 84 bytes took
    1.1 ms of a 3.0 ms step, each rank's training thread waiting 0.55-0.85 ms a step for a core);
    rank-imbalance HIGH (rank 1 did the same work 50% slower, waiting 0.34 ms a step for a core
    against rank 0's 0.06). Each rank's collectives run on threads beside its training thread:
    which rank waits, and how long an all-reduce takes, is the scheduler's choice."""
    cores = conditions.usable_cores if conditions is not None else None
    kind = _host_paced(finding)
    if not kind or not cores or ranks_here < max(2, cores):
        return ""
    what = "how long gloo's collectives take" if kind == "gloo" else "which rank works slower"
    return (
        f"{ranks_here} ranks shared {cores} cores: each rank's collectives run on CPU threads "
        f"beside its training thread, so {what} is the scheduler's choice"
    )


def waiting_is_load(finding: Finding, ready_ms: dict[int, float], wait_ms: dict[int, float]) -> str:
    """Why a collective finding measured other ranks held back by the machine's load; "" when
    it did not. `wait_ms`: each rank's collective time with no compute beside it, per step.

    A rank's exposed collective time is the transfer plus its wait for the last rank to arrive.
    HF's run_clm on 2 CPU ranks got comm-overlap on rank 0 only beside two busy loops: 30 ms
    exposed per step against rank 1's 12 ms, while rank 1 waited 23 ms per step longer for a
    core; on a quiet machine neither rank crossed the line. When most of the rank's exposed time
    is its excess over the rank that waits least, and the others' extra run-queue wait covers
    half that excess or more, the finding measured the load, not the communication."""
    rank = finding.rank
    if finding.rule not in COMM_RULES or rank not in wait_ms or rank not in ready_ms:
        return ""
    others = [r for r in ready_ms if r != rank]
    least = min(wait_ms, key=wait_ms.__getitem__)
    excess = wait_ms[rank] - wait_ms[least]
    if not others or excess <= 0 or excess < 0.5 * wait_ms[rank]:
        return ""
    held = max(ready_ms[r] for r in others) - ready_ms[rank]
    if held < 0.5 * excess:
        return ""
    return (
        f"rank {rank} waited {wait_ms[rank]:.1f} ms per step in collectives, {excess:.1f} ms "
        f"more than rank {least}, while another rank waited {held:.1f} ms per step longer for a "
        "CPU core that other processes held: the machine's load, not the communication"
    )
