"""Run the registered rules over one or more traces (and live facts) and collect a Diagnosis."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from torchpace.doctor.diagnosis import Diagnosis, RankView, baseline_position
from torchpace.doctor.facts import rank_works
from torchpace.doctor.facts.ranks import RankWork
from torchpace.doctor.finding import Finding, Skipped
from torchpace.doctor.passes import apply_policies
from torchpace.doctor.recording import Recording
from torchpace.doctor.registry import NotApplicable, RuleSpec, check_choice
from torchpace.doctor.skips import doctor_advice
from torchpace.doctor.summary import (
    RankSummary,
    Thresholds,
    call_rule,
    one_per_cause,
    select,
    summarise,
)
from torchpace.trace.model import Trace
from torchpace.trace.summary import rank_of
from torchpace.trace.top import top_tables

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection


def _run_trace_rule(
    spec: RuleSpec, ranks: Sequence[RankSummary]
) -> tuple[list[Finding], list[Skipped]]:
    """The rule's outcomes on every rank (computed where each was summarised), gathered."""
    found: list[Finding] = []
    skipped: list[Skipped] = []
    for summary in ranks:
        out = summary.found[spec.name]
        if isinstance(out, Skipped):
            if all(s.reason != out.reason for s in skipped):
                skipped.append(out)
            continue
        if len(ranks) > 1:
            out = [replace(f, rank=summary.rank) for f in out]
        found.extend(out)
    return found, skipped


def _run(
    spec: RuleSpec,
    ranks: Sequence[RankSummary],
    kwargs: dict[str, Any],
    live: Inspection | None,
) -> tuple[list[Finding], list[Skipped]]:
    if spec.input == "trace":
        return _run_trace_rule(spec, ranks)
    if spec.input == "ranks":
        if len(ranks) < 2:
            world = ranks[0].facts.info.world_size or 1
            if world < 2:
                return [], []
            reason = f"only one of {world} ranks' traces was given"
            return [], [Skipped(spec.name, reason, "analyze the folder holding every rank's trace")]
        out = call_rule(spec, [r.facts for r in ranks], kwargs, live)
    else:
        if live is None:
            return [], []  # live rules need `torchpace doctor`; analyze has no live objects
        out = call_rule(spec, live, kwargs, live)
    return ([], [out]) if isinstance(out, Skipped) else (one_per_cause(out), [])


def _as_list(traces: Trace | Sequence[Trace]) -> list[Trace]:
    items = [traces] if isinstance(traces, Trace) else list(traces)
    if not items:
        raise ValueError("diagnose() needs at least one Trace; got an empty sequence")
    for t in items:
        if not isinstance(t, Trace):
            raise TypeError(
                f"diagnose() takes Trace objects (load_trace(path)); got {type(t).__name__}"
            )
    return items


def diagnose(
    traces: Trace | Sequence[Trace],
    *,
    only: Collection[str] | None = None,
    ignore: Collection[str] | None = None,
    live: Inspection | None = None,
    thresholds: Thresholds | None = None,
    top: bool = False,
    recording: Recording | None = None,
) -> Diagnosis:
    """Run every registered rule (or `only` those, minus `ignore`) and collect the Diagnosis.

    Args:
        traces: one Trace, or one per rank of the same run.
        live: what `torchpace doctor` saw of live objects; enables "live" rules.
        thresholds: per-rule keyword overrides, e.g. {"gpu-idle": {"min_idle_fraction": 0.3}}.
        top: fill `Diagnosis.top` (the headline trace's top kernels and operators, ~40 ms on a
            200k-event trace) and `Diagnosis.pictures`, for the HTML report.
        recording: the tool recorded the traces (doctor/recording.py): its run's measures are
            applied, its title, notes and torch version head the report.
    """
    items = _as_list(traces)
    given = check_choice(only, ignore, thresholds)  # RuleChoiceError (a ValueError) when wrong
    specs = select(only, ignore)
    alone = len(items) == 1
    ranks = [
        summarise(t, specs, given, live, rank_of(t.info, i), alone=alone)
        for i, t in enumerate(items)
    ]
    headline = items.__getitem__ if top else None
    return judge_ranks(ranks, specs, given, live=live, headline=headline, recording=recording)


def judge_ranks(
    ranks: Sequence[RankSummary],
    specs: Sequence[RuleSpec],
    given: Thresholds,
    *,
    live: Inspection | None = None,
    headline: Callable[[int], Trace] | None = None,
    recording: Recording | None = None,
) -> Diagnosis:
    """The Diagnosis of one or more ranks' summaries (doctor/summary.py), in rank order: the
    cross-rank rules, the passes and the severity policy over what each rank's own rules found.

    Args:
        specs, given: the rules chosen and their checked thresholds, as `summarise` ran them.
        headline: the Trace at a position of `ranks`, for the top tables and pictures of the
            HTML report (the headline rank's events, loaded again); None: none wanted.
        recording: as diagnose's.
    """
    if not ranks:
        raise ValueError("judge_ranks() needs at least one rank's summary; got none")
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for spec in specs:
        if spec.input == "ranks" and recording is not None and recording.apart:
            skipped.append(Skipped(spec.name, recording.apart))
            continue
        found, skip = _run(spec, ranks, dict(given.get(spec.name, {})), live)
        findings.extend(found)
        skipped.extend(skip)
    works = _works(ranks)
    slowest = _slowest_position(ranks, works)
    findings, withheld = apply_policies(
        findings,
        _step_ms(ranks, slowest),
        straggler=ranks[slowest].rank if len(ranks) > 1 else None,
        works=works,
        live_rules=frozenset(s.name for s in specs if s.input == "live"),
        recording=recording,
    )
    diagnosis = _assemble(ranks, slowest, findings, [*skipped, *withheld], works)
    diagnosis = replace(diagnosis, memory=ranks[slowest].memory)
    if recording is not None:
        diagnosis = _recorded(diagnosis, recording, live)
    if headline is not None:
        from torchpace.doctor.pictures import pictures

        head = headline(slowest)
        diagnosis = replace(diagnosis, top=top_tables(head), pictures=pictures(head))
    return diagnosis


def _step_ms(ranks: Sequence[RankSummary], slowest: int) -> Callable[[Finding], float]:
    """What a finding's saving is a share of (doctor/severity.py): the median step of the rank
    it was found on, the headline rank's for findings of no rank; the device's where it lags
    the host (facts.device_steps)."""
    infos = [r.facts.info for r in ranks]

    def step_ms(f: Finding) -> float:
        position = baseline_position(f.rank, infos)
        return ranks[slowest if position is None else position].step_ms

    return step_ms


def _recorded(diagnosis: Diagnosis, recording: Recording, live: Inspection | None) -> Diagnosis:
    """A recording the tool made: titled by it, its run's notes first (the live inspection's
    last), its conditions and caveat, the torch it ran with, advice a user can take
    (doctor/skips.py), and under --follow the whole run's account."""
    notes = (*recording.notes, *diagnosis.notes, *(live.notes if live is not None else ()))
    whole_run = live.whole_run if live is not None else None
    return replace(
        _with_torch(diagnosis, recording.torch_version),
        script=recording.title,
        notes=tuple(dict.fromkeys(notes)),
        skipped=tuple(doctor_advice(s) for s in diagnosis.skipped),
        conditions=recording.conditions,
        caveat=recording.caveat,
        account=whole_run.account if whole_run is not None else None,
    )


def _with_torch(diagnosis: Diagnosis, version: str | None) -> Diagnosis:
    """The header names the torch the script ran with (the trace does not record it)."""
    if version is None:
        return diagnosis
    ranks = tuple(
        replace(view, info=replace(view.info, torch_version=view.info.torch_version or version))
        for view in diagnosis.ranks
    )
    info = replace(diagnosis.info, torch_version=diagnosis.info.torch_version or version)
    return replace(diagnosis, info=info, ranks=ranks)


def _works(ranks: Sequence[RankSummary]) -> list[RankWork] | None:
    """Every rank's work and collective wait (multi-rank input only); None if not measurable."""
    if len(ranks) < 2:
        return None
    try:
        return rank_works([r.facts for r in ranks])
    except NotApplicable:
        return None


def _slowest_position(ranks: Sequence[RankSummary], works: list[RankWork] | None) -> int:
    """The rank that works longest per step.

    DDP equalises step times (every rank waits for the slowest in its collectives), so the
    median step cannot tell the straggler; its work (step minus exposed collective wait) can.
    """
    if len(ranks) < 2:
        return 0
    if works is None:
        return max(range(len(ranks)), key=lambda i: ranks[i].facts.breakdown.median_step_ms)
    return max(range(len(ranks)), key=lambda i: works[i].work_ms)


def _assemble(
    ranks: Sequence[RankSummary],
    position: int,
    findings: list[Finding],
    skipped: list[Skipped],
    works: list[RankWork] | None,
) -> Diagnosis:
    head = ranks[0]
    views: tuple[RankView, ...] = ()
    slowest: int | None = None
    notes = [*head.facts.info.notes, *head.lag_note]
    if len(ranks) > 1:
        views = tuple(
            RankView(r.facts.info, r.facts.breakdown, works[i] if works else None)
            for i, r in enumerate(ranks)
        )
        head, slowest = ranks[position], ranks[position].rank
        measure = (
            "by work (median step minus time only waiting in collectives)"
            if works
            else "by median step"
        )
        notes = [
            f"{len(ranks)} ranks analysed; the headline is the slowest rank {measure}: rank {slowest}"
        ]
        notes += [n for r in ranks for n in r.facts.info.notes if n not in notes]
    return Diagnosis(
        info=head.facts.info,
        breakdown=head.facts.breakdown,
        findings=tuple(findings),
        skipped=tuple(skipped),
        ranks=views,
        slowest_rank=slowest,
        notes=tuple(notes),
        trace_files=tuple(r.facts.info.path for r in ranks),
        labels=head.labels,
    )
