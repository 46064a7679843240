"""Every policy applied to the rules' findings, in one order: `apply_policies`.

Rules judge one trace (or, for rank-imbalance, the ranks' work side by side) and propose a
severity; the engine (doctor/diagnose.py) then runs the findings through `apply_policies`, which
changes or withholds findings, never adds one. The cross-rank passes are here; each other step
lives with the decision it applies (plausible figures, severity, the run's conditions), and has its
own test (tests/doctor/test_passes.py, test_severity.py, test_conditions.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from torchpace.doctor.conditions import (
    COMM_RULES,
    cap_noisy,
    on_gloo,
    sharing_cores,
    slowed_by_busy_host,
    straggler_is_load,
    waiting_is_load,
)
from torchpace.doctor.facts.ranks import RankWork
from torchpace.doctor.finding import Finding, Severity, Skipped, sort_findings
from torchpace.doctor.plausible import withhold
from torchpace.doctor.recording import Recording
from torchpace.doctor.severity import judge
from torchpace.policy.window import MIN_STEPS


def apply_policies(
    findings: list[Finding],
    step_ms: Callable[[Finding], float],
    *,
    straggler: int | None,
    works: Sequence[RankWork] | None,
    live_rules: frozenset[str],
    recording: Recording | None,
) -> tuple[list[Finding], list[Skipped]]:
    """The findings after every policy, sorted for reports, and those withheld as Skipped:

    1. figures no real run gives are withheld (doctor/plausible.py);
    2. several ranks (`straggler`: the rank that works longest): the collective findings of ranks
       that wait for it are demoted, or withheld when they mostly wait for a slower rank;
    3. severity from the saving's share of `step_ms` (doctor/severity.py);
    4. a `recording` of the tool's: a noisy run's timed findings are capped at MEDIUM
       (doctor/conditions.py), a window too short for step-time verdicts withholds the trace
       rules' findings, and cross-rank findings that measured the machine's load, or ranks that
       share their host's cores, are withheld.
    """
    findings, skipped = withhold(findings)
    if straggler is not None:
        findings = demote_waiting_comm(findings, straggler)
        if works:
            findings, waiting = withhold_waiting_comm(findings, works)
            skipped.extend(waiting)
            findings, beyond = withhold_comm_beyond_least_waiting(findings, works)
            skipped.extend(beyond)
    findings = sort_findings([judge(f, step_ms(f), live=f.rule in live_rules) for f in findings])
    if recording is None:
        return findings, skipped
    findings, withheld = _as_recorded(findings, recording, works or (), live_rules)
    return findings, skipped + withheld


def _as_recorded(
    findings: list[Finding],
    recording: Recording,
    works: Sequence[RankWork],
    live_rules: frozenset[str],
) -> tuple[list[Finding], list[Skipped]]:
    """Step 4 of `apply_policies`: what the tool's own recording measured beside the traces."""
    if recording.conditions is not None:
        findings = sort_findings(cap_noisy(findings, recording.conditions, live_rules))
    withheld = [f for f in findings if recording.short and f.rule not in live_rules]
    skipped = _too_short(withheld, recording.caveat)
    loaded = _measured_load(findings, recording, works)
    withheld += [f for f, _ in loaded]
    skipped.extend(Skipped(f.rule, why, "run again on a quieter machine") for f, why in loaded)
    shared = [(f, sharing_cores(f, recording.conditions, recording.ranks_here)) for f in findings]
    shared = [(f, why) for f, why in shared if why and f not in withheld]
    withheld += [f for f, _ in shared]
    enable = "give each rank a core or more of its own (fewer ranks, or a larger machine)"
    skipped.extend(Skipped(f.rule, why, enable) for f, why in shared)
    return [f for f in findings if f not in withheld], skipped


def _too_short(findings: Sequence[Finding], caveat: str) -> list[Skipped]:
    """The step-time findings of a window too short to judge, listed as not analysed."""
    rules = dict.fromkeys(f.rule for f in findings)
    reason = caveat.split(":")[0] + f": too few for step-time verdicts (at least {MIN_STEPS})"
    return [Skipped(r, reason, "run with more steps, or let the window hold") for r in rules]


def _measured_load(
    findings: Sequence[Finding], recording: Recording, works: Sequence[RankWork]
) -> list[tuple[Finding, str]]:
    """Cross-rank findings that measured the machine's load (doctor/conditions.py): a straggler
    held back by other processes, the others' collective time spent waiting for it, and what a
    busy host slows on every rank (gloo's collectives, the same work done more slowly)."""
    ready, wait = recording.ready_ms, {w.rank: w.wait_ms for w in works}
    found = [
        (
            f,
            straggler_is_load(f, ready)
            or waiting_is_load(f, ready, wait)
            or slowed_by_busy_host(f, recording.conditions),
        )
        for f in findings
    ]
    return [(f, why) for f, why in found if why]


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


# complex: one set comprehension of four conditions and the Skipped records; its docstring is the
# rule.
def withhold_comm_beyond_least_waiting(
    findings: list[Finding], works: Sequence[RankWork]
) -> tuple[list[Finding], list[Skipped]]:
    """With gloo, a collective rule that does not fire on the rank that waits least in
    collectives is no finding on the others: that rank's exposed collective time is what the
    communication costs every rank, and what another rank spends there beyond it is waiting for
    slower ranks (rank-imbalance's to judge). With no straggler past rank-imbalance's line.

    gloo only: its collectives run on CPU threads that share the cores with the ranks' compute,
    so which rank waits is the scheduler's choice, step by step and run by run. NCCL's waits
    follow the work: DLRM's 8 V100 ranks (corpus) wait 1.6-11.1 ms per step in all_to_all and
    all_reduce, rank 7 least (14% of its step, under comm-bound's line), and the expert reading
    keeps comm-bound: the same ranks wait every step.

    On 2 CPU ranks the busiest waiter changes from run to run: pytorch/examples' DDP tutorial
    (an 84-byte all-reduce per 2-5 ms step) got comm-bound on rank 1 (1.27 ms, 27% of its step)
    in one quiet run and nothing in the next, while rank 0 waited 0.33-0.37 ms (9-15%) in both;
    accelerate's nlp_example got comm-overlap on rank 0 (15.1 ms exposed, 11%) where rank 1
    exposed 10.0 ms (7%), and nothing on the next run (5-6% on both)."""
    if any(f.rule == "rank-imbalance" for f in findings) or len(works) < 2:
        return findings, []
    least = min(works, key=lambda w: w.wait_ms)
    fired = {(f.rule, f.rank) for f in findings}
    lacking = {
        f.rule
        for f in findings
        if f.rule in COMM_RULES
        and f.rank is not None
        and (f.rule, least.rank) not in fired
        and on_gloo(f)
    }
    if not lacking:
        return findings, []
    most = {r: max(w.wait_ms for w in works if (r, w.rank) in fired) for r in lacking}
    return [f for f in findings if f.rule not in lacking], [
        Skipped(
            rule,
            f"rank {least.rank} waits least in collectives ({least.wait_ms:.1f} ms per step) and "
            f"its collectives are under this rule's line: the up to {most[rule] - least.wait_ms:.1f}"
            " ms per step more that other ranks spend there is waiting for slower ranks, not "
            "communication",
            "see the per-rank table; rank-imbalance judges the ranks' balance",
        )
        for rule in sorted(lacking)
    ]
