"""Run the registered rules over one or more traces (and live facts) and collect a Diagnosis."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from torchpace.doctor.diagnosis import Diagnosis, RankView, baseline_position
from torchpace.doctor.facts import facts_of, rank_works
from torchpace.doctor.facts.ranks import RankWork
from torchpace.doctor.finding import Finding, Skipped
from torchpace.doctor.passes import apply_policies
from torchpace.doctor.recording import Recording
from torchpace.doctor.registry import NotApplicable, RuleSpec, all_rules, check_choice
from torchpace.doctor.skips import doctor_advice
from torchpace.trace.labels import user_labels
from torchpace.trace.model import Trace
from torchpace.trace.summary import rank_of
from torchpace.trace.top import top_tables

if TYPE_CHECKING:
    from torchpace.doctor.memory_view import MemoryView
    from torchpace.runner.sensors.inspection import Inspection

Thresholds = Mapping[str, Mapping[str, Any]]


def _select(only: Collection[str] | None, ignore: Collection[str] | None) -> list[RuleSpec]:
    specs = all_rules()
    if only:
        specs = [s for s in specs if s.name in set(only)]
    return [s for s in specs if s.name not in set(ignore or ())]


def _call(
    spec: RuleSpec, arg: object, kwargs: dict[str, Any], live: Inspection | None
) -> list[Finding] | Skipped:
    if spec.live:
        kwargs = {**kwargs, "live": live}
    try:
        return spec.func(arg, **kwargs)
    except NotApplicable as exc:
        return Skipped(spec.name, exc.reason, exc.enable)
    except Exception as exc:  # a rule's bug must not cost the user the other findings
        return Skipped(
            spec.name, f"rule failed ({type(exc).__name__}: {exc}); please report this", ""
        )


def _run_trace_rule(
    spec: RuleSpec, traces: Sequence[Trace], kwargs: dict[str, Any], live: Inspection | None
) -> tuple[list[Finding], list[Skipped]]:
    found: list[Finding] = []
    skipped: list[Skipped] = []
    for position, trace in enumerate(traces):
        out = _call(spec, trace, kwargs, live)
        if isinstance(out, Skipped):
            if all(s.reason != out.reason for s in skipped):
                skipped.append(out)
            continue
        if len(traces) > 1:
            out = [replace(f, rank=rank_of(trace.info, position)) for f in out]
        found.extend(one_per_cause(out))
    return found, skipped


def _run(
    spec: RuleSpec,
    traces: Sequence[Trace],
    kwargs: dict[str, Any],
    live: Inspection | None,
) -> tuple[list[Finding], list[Skipped]]:
    if spec.input == "trace":
        return _run_trace_rule(spec, traces, kwargs, live)
    if spec.input == "ranks":
        if len(traces) < 2:
            world = traces[0].info.world_size or 1
            if world < 2:
                return [], []
            reason = f"only one of {world} ranks' traces was given"
            return [], [Skipped(spec.name, reason, "analyze the folder holding every rank's trace")]
        out = _call(spec, list(traces), kwargs, live)
    else:
        if live is None:
            return [], []  # live rules need `torchpace doctor`; analyze has no live objects
        out = _call(spec, live, kwargs, live)
    return ([], [out]) if isinstance(out, Skipped) else (one_per_cause(out), [])


def one_per_cause(found: Sequence[Finding]) -> list[Finding]:
    """A rule's identical findings as one, saying how many: two DataLoaders made at one line
    (timm's create_loader builds train and eval loaders there) gave two identical findings."""
    kept: list[Finding] = []
    counts: list[int] = []
    for f in found:
        for i, seen in enumerate(kept):
            if f == seen:
                counts[i] += 1
                break
        else:
            kept.append(f)
            counts.append(1)
    return [
        f if n == 1 else replace(f, summary=f"{f.summary} ({n} alike, made at the same place)")
        for f, n in zip(kept, counts, strict=True)
    ]


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
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    given = check_choice(only, ignore, thresholds)  # RuleChoiceError (a ValueError) when wrong
    specs = _select(only, ignore)
    for spec in specs:
        found, skip = _run(spec, items, given.get(spec.name, {}), live)
        findings.extend(found)
        skipped.extend(skip)
    works = _works(items)
    slowest = _slowest_position(items, works)
    findings, withheld = apply_policies(
        findings,
        _step_ms(items, slowest),
        straggler=rank_of(items[slowest].info, slowest) if len(items) > 1 else None,
        works=works,
        live_rules=frozenset(s.name for s in specs if s.input == "live"),
        recording=recording,
    )
    diagnosis = _assemble(items, slowest, findings, [*skipped, *withheld], works)
    diagnosis = replace(diagnosis, memory=_memory(items[slowest], live))
    if recording is not None:
        diagnosis = _recorded(diagnosis, recording, live)
    if top:
        from torchpace.doctor.pictures import pictures

        head = items[slowest]
        diagnosis = replace(diagnosis, top=top_tables(head), pictures=pictures(head))
    return diagnosis


def _memory(head: Trace, live: Inspection | None) -> MemoryView | None:
    """The memory view of the headline trace, with the live census under the doctor."""
    from torchpace.doctor.memory_view import live_notes, memory_view

    record = getattr(live, "memory", None)  # None without a live run
    view = memory_view(head, record.census if record is not None else None)
    if view is None or record is None:
        return view
    return replace(view, notes=(*view.notes, *live_notes(record)))


def _step_ms(items: list[Trace], slowest: int) -> Callable[[Finding], float]:
    """What a finding's saving is a share of (doctor/severity.py): the median step of the rank
    it was found on, the headline rank's for findings of no rank; the device's where it lags
    the host (facts.device_steps)."""
    infos = [t.info for t in items]

    def step_ms(f: Finding) -> float:
        position = baseline_position(f.rank, infos)
        return facts_of(items[slowest if position is None else position]).step_ms

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


def _works(items: list[Trace]) -> list[RankWork] | None:
    """Every rank's work and collective wait (multi-rank input only); None if not measurable."""
    if len(items) < 2:
        return None
    try:
        return rank_works(items)
    except NotApplicable:
        return None


def _slowest_position(items: list[Trace], works: list[RankWork] | None) -> int:
    """The rank that works longest per step.

    DDP equalises step times (every rank waits for the slowest in its collectives), so the
    median step cannot tell the straggler; its work (step minus exposed collective wait) can.
    """
    if len(items) < 2:
        return 0
    if works is None:
        return max(range(len(items)), key=lambda i: items[i].breakdown.median_step_ms)
    return max(range(len(items)), key=lambda i: works[i].work_ms)


def _lag_note(trace: Trace) -> list[str]:
    """Why the findings' step is not the header's: the host ran ahead of a busier GPU."""
    lag = facts_of(trace).device_steps
    if not lag.lags or lag.device_ms is None:
        return []
    return [
        f"the GPU lags the host: each step's kernels take {lag.device_ms:.1f} ms of GPU timeline "
        f"while the host's steps take {lag.host_ms:.1f} ms (nothing in a step waits for the GPU); "
        "kernel time per step is judged against the GPU's step"
    ]


def _assemble(
    items: list[Trace],
    position: int,
    findings: list[Finding],
    skipped: list[Skipped],
    works: list[RankWork] | None,
) -> Diagnosis:
    head = items[0]
    ranks: tuple[RankView, ...] = ()
    slowest: int | None = None
    notes = [*head.info.notes, *_lag_note(head)]
    if len(items) > 1:
        ranks = tuple(
            RankView(t.info, t.breakdown, works[i] if works else None) for i, t in enumerate(items)
        )
        head, slowest = items[position], rank_of(items[position].info, position)
        measure = (
            "by work (median step minus time only waiting in collectives)"
            if works
            else "by median step"
        )
        notes = [
            f"{len(items)} ranks analysed; the headline is the slowest rank {measure}: rank {slowest}"
        ]
        notes += [n for t in items for n in t.info.notes if n not in notes]
    return Diagnosis(
        info=head.info,
        breakdown=head.breakdown,
        findings=tuple(findings),
        skipped=tuple(skipped),
        ranks=ranks,
        slowest_rank=slowest,
        notes=tuple(notes),
        trace_files=tuple(t.info.path for t in items),
        labels=user_labels(head),
    )
