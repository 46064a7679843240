"""One rank reduced to what the diagnosis reads of it, where the rank is decoded.

A rank's Trace is tens of MB (79 MB for a 109k-event A100 rank); what the diagnosis reads of it
once its per-rank rules have run is a few kB: those rules' findings, its header and breakdown,
its work and collective wait (doctor/facts/ranks.py), its user labels. `summarise` computes that
where the rank was decoded (a worker process, or a cluster's), so a folder of 1,024 ranks is
judged with one rank's events in memory per worker. The cross-rank rules, the passes and the
severity policy then run over the summaries (doctor/diagnose.py); the HTML report's tables,
which need the headline rank's events, load that one rank again.

A summary is plain picklable data: it crosses process boundaries by pickle.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import msgspec

from torchpace.doctor.facts import RankFacts, facts_of, rank_facts
from torchpace.doctor.finding import Finding, Skipped
from torchpace.doctor.registry import NotApplicable, RuleSpec, all_rules, check_choice
from torchpace.errors import TraceError
from torchpace.trace.labels import UserLabels, user_labels
from torchpace.trace.load import load_rank
from torchpace.trace.model import Trace

if TYPE_CHECKING:
    from torchpace.doctor.memory_view import MemoryView
    from torchpace.runner.sensors.inspection import Inspection

Thresholds = Mapping[str, Mapping[str, Any]]


class RankSummary(msgspec.Struct, frozen=True):
    """One rank's per-rank rule outcomes and facts: all the diagnosis keeps of its Trace."""

    facts: RankFacts
    # Each per-rank ("trace") rule's outcome on this rank, its identical findings made one.
    found: Mapping[str, list[Finding] | Skipped]
    labels: UserLabels | None
    # The step its findings' savings are shares of: the device's where it lags the host
    # (facts.device_steps), and the note saying so.
    step_ms: float
    lag_note: tuple[str, ...]
    memory: MemoryView | None  # its memory view (with the live census under the doctor)

    @property
    def rank(self) -> int:
        """The rank it is (trace.summary.rank_of, decided where the ranks are put in order)."""
        return self.facts.rank

    def noted(self, notes: tuple[str, ...]) -> RankSummary:
        """The same summary, its header noting `notes` too (files left out of the analysis)."""
        info = replace(self.facts.info, notes=(*self.facts.info.notes, *notes))
        return msgspec.structs.replace(self, facts=msgspec.structs.replace(self.facts, info=info))

    def ranked(self, rank: int) -> RankSummary:
        """The same summary under `rank`."""
        return msgspec.structs.replace(self, facts=msgspec.structs.replace(self.facts, rank=rank))


class RankJob(msgspec.Struct, frozen=True):
    """Load one rank's trace file and summarise it: what a worker process (or a cluster's)
    runs per rank. Plain picklable data; the rules are looked up by name where it runs."""

    only: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    thresholds: Thresholds | None = None
    live: Inspection | None = None
    jobs: int = 1  # processes decoding the one file (as trace.load.load_trace takes it)

    def __call__(self, path: str) -> RankSummary | str:
        """The file's summary, or why it cannot be read (a TraceError's one line)."""
        given = check_choice(self.only, self.ignore, self.thresholds)
        specs = select(self.only, self.ignore)
        try:
            trace = load_rank(path, jobs=self.jobs)  # dropped once summarised
        except TraceError as exc:
            return str(exc)
        summary = summarise(trace, specs, given, self.live)
        # What facts_of and the per_trace views keep point back at the trace: a cycle the GC,
        # off inside no_teardown, would never free. Emptied, the trace goes now.
        trace._cache.clear()
        return summary


def select(only: Collection[str] | None, ignore: Collection[str] | None) -> list[RuleSpec]:
    """The registered rules to run: `only` those (all when None), less `ignore`."""
    specs = all_rules()
    if only:
        specs = [s for s in specs if s.name in set(only)]
    return [s for s in specs if s.name not in set(ignore or ())]


def summarise(
    trace: Trace,
    specs: Sequence[RuleSpec],
    thresholds: Thresholds,
    live: Inspection | None = None,
    rank: int = 0,
    *,
    alone: bool = False,
) -> RankSummary:
    """Run the per-rank rules of `specs` over `trace` and keep what the diagnosis reads.

    Args:
        thresholds: per-rule keyword overrides, already checked (registry.check_choice).
        rank: the rank it is, when known; the caller that orders the ranks sets it after.
        alone: the only trace analysed: nothing compares its work with another rank's, so
            it is not measured.
    """
    found: dict[str, list[Finding] | Skipped] = {}
    for spec in specs:
        if spec.input == "trace":
            out = call_rule(spec, trace, dict(thresholds.get(spec.name, {})), live)
            found[spec.name] = out if isinstance(out, Skipped) else one_per_cause(out)
    facts = rank_facts(trace, rank, measure=not alone)
    step = facts_of(trace).step_ms
    return RankSummary(
        facts, found, user_labels(trace), step, _lag_note(trace), _memory(trace, live)
    )


def _memory(trace: Trace, live: Inspection | None) -> MemoryView | None:
    """The memory view of the trace, with the live census under the doctor."""
    from torchpace.doctor.memory_view import live_notes, memory_view

    record = getattr(live, "memory", None)  # None without a live run
    view = memory_view(trace, record.census if record is not None else None)
    if view is None or record is None:
        return view
    return replace(view, notes=(*view.notes, *live_notes(record)))


def _lag_note(trace: Trace) -> tuple[str, ...]:
    """Why the findings' step is not the header's: the host ran ahead of a busier GPU."""
    lag = facts_of(trace).device_steps
    if not lag.lags or lag.device_ms is None:
        return ()
    return (
        f"the GPU lags the host: each step's kernels take {lag.device_ms:.1f} ms of GPU timeline "
        f"while the host's steps take {lag.host_ms:.1f} ms (nothing in a step waits for the GPU); "
        "kernel time per step is judged against the GPU's step",
    )


def call_rule(
    spec: RuleSpec, arg: object, kwargs: dict[str, Any], live: Inspection | None
) -> list[Finding] | Skipped:
    """The rule's findings, or why it was skipped (NotApplicable, or its own failure)."""
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
