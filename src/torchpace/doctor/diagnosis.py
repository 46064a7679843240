"""A Diagnosis: everything a reporter needs, as plain data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Skipped
from torchpace.trace.summary import Breakdown, TraceInfo, rank_of
from torchpace.trace.top import TopTables

if TYPE_CHECKING:
    from torchpace.doctor.facts.ranks import RankWork
    from torchpace.doctor.memory_view import MemoryView
    from torchpace.doctor.pictures import Pictures
    from torchpace.doctor.verification import Verification
    from torchpace.runner.conditions import RunConditions
    from torchpace.runner.sensors.whole_run import RunAccount
    from torchpace.trace.labels import UserLabels

SCHEMA_VERSION = 2  # bump when the JSON report's shape changes


def baseline_position(rank: int | None, infos: Sequence[TraceInfo]) -> int | None:
    """Which trace a finding of `rank` is weighed against: the first of that rank
    (trace.summary.rank_of); None for a finding of no rank, or of none of theirs (the headline
    trace's then). The severity policy and the reports both ask here, so the share of the step a
    report shows is the one the severity was set from."""
    if rank is None:
        return None
    return next((i for i, info in enumerate(infos) if rank_of(info, i) == rank), None)


@dataclass(frozen=True)
class RankView:
    """One rank's header and breakdown, shown side by side in multi-rank reports."""

    info: TraceInfo
    breakdown: Breakdown
    # Its median step split into work and waiting in collectives (doctor/facts/ranks.py): the
    # measure the slowest rank is named by. None when it could not be measured.
    work: RankWork | None = None


@dataclass(frozen=True)
class Diagnosis:
    """The result of `analyze` or `doctor`: what was measured and what was found."""

    info: TraceInfo  # for multi-rank: the slowest rank's (named in `slowest_rank`)
    breakdown: Breakdown
    findings: tuple[Finding, ...]  # sorted by estimated saving (doctor.finding.sort_findings)
    skipped: tuple[Skipped, ...] = ()
    ranks: tuple[RankView, ...] = ()  # empty for a single trace
    slowest_rank: int | None = None
    # How steps were found, what could not be analysed, where files were written.
    notes: tuple[str, ...] = ()
    # Raw traces, to open in Perfetto or TensorBoard.
    trace_files: tuple[str, ...] = field(default_factory=tuple)
    # The headline trace's top kernels and host operators (HTML tables); None when not asked for.
    top: TopTables | None = None
    # The headline trace's step lanes, GPU idle by cause and memory curve (doctor/pictures.py),
    # filled with `top`, for the HTML report; None when not asked for.
    pictures: Pictures | None = None
    # `torchpace doctor` only: the machine's load and the profiler's own cost during the run.
    conditions: RunConditions | None = None
    # The user's own record_function labels in the headline trace (trace/labels.py); None: none.
    labels: UserLabels | None = None
    # The command `torchpace doctor` ran (`train.py --epochs 1`), the report's title; "" when
    # trace files were analysed. The doctor owns the profiler then: no advice about its options.
    script: str = ""
    # `torchpace doctor --verify` only: how the fixes were measured on the script itself.
    verification: Verification | None = None
    # `torchpace doctor` only: why the profiled window is short of what was asked ("3 of 10 steps
    # profiled: ..."), said first in the verdict; "" when it holds.
    caveat: str = ""
    # `torchpace doctor --follow` only: where the whole run's wall time went, by phase.
    account: RunAccount | None = None
    # The headline trace's peak step split by what holds it (doctor/memory_view.py); None when
    # the trace has no memory events.
    memory: MemoryView | None = None
