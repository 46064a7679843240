"""One side of a comparison, as plain data: per-step samples and findings from a trace or a report.

A side is read from a torch.profiler trace (a file), a folder of per-rank traces, or a JSON report
that `torchpace analyze`/`doctor` wrote. Everything a comparison needs is kept per typical step
(step time, each phase, each kernel's and host op's time), so that both sides give samples and the
change gets an interval. For several ranks the slowest rank speaks for the run, as in reports.
"""

from __future__ import annotations

import gzip
import json
import os
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from torchpace.errors import TraceError
from torchpace.trace.names import STEP_MARKER
from torchpace.trace.summary import Phase, StepBreakdown, rank_of

if TYPE_CHECKING:
    from torchpace.doctor.diagnosis import Diagnosis
    from torchpace.trace.model import Trace

SideKind = Literal["trace", "ranks", "report"]
PEEK_BYTES = 512  # a torchpace JSON report names its tool in its first lines


@dataclass(frozen=True)
class FindingRef:
    """What a comparison needs of one finding."""

    rule: str
    severity: str
    summary: str
    saving_ms: float | None
    rank: int | None = None


@dataclass(frozen=True)
class Side:
    """One run, per typical step: step and phase times (ms), kernel and op times, findings."""

    path: str
    kind: SideKind
    device: str
    ranks: int
    step_ms: tuple[float, ...]
    phase_ms: Mapping[str, tuple[float, ...]]
    findings: tuple[FindingRef, ...]
    # None when the side holds no per-event data (a report) or no kernels (a CPU trace).
    kernel_ms: Mapping[str, tuple[float, ...]] | None = None
    op_ms: Mapping[str, tuple[float, ...]] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Steady steps left out of the typical ones (trace/outliers.py), as (step number, why):
    # evaluation, checkpointing, outliers. Both sides are chosen by the same rule.
    set_apart: tuple[tuple[int, str], ...] = ()


def load_side(path: str) -> Side:
    """Read a trace, a folder of ranks or a torchpace JSON report; TraceError for anything else."""
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file or folder; give a trace, a folder of traces or a "
                         "torchpace JSON report")  # fmt: skip
    if os.path.isfile(path) and _is_report(path):
        return _from_report(path)
    return _from_traces(path)


def _is_report(path: str) -> bool:
    opener: Any = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            head = f.read(PEEK_BYTES)
    except OSError:
        return False
    return b'"tool": "torchpace"' in head or b'"tool":"torchpace"' in head


def _from_traces(path: str) -> Side:
    from torchpace.doctor.diagnose import diagnose
    from torchpace.trace.load import load_traces

    traces = load_traces(path)
    diagnosis = diagnose(traces)
    head = _headline(traces, diagnosis)
    typical = head.breakdown.typical  # the steps the breakdown's medians are over
    apart = tuple((s.index, s.outlier) for s in head.breakdown.steps if s.outlier)
    return Side(
        path=path,
        kind="ranks" if len(traces) > 1 else "trace",
        device=head.info.device_kind,
        ranks=len(traces),
        step_ms=tuple(s.duration_ms for s in typical),
        phase_ms=_phases(typical),
        findings=tuple(
            FindingRef(f.rule, f.severity.label, f.summary, f.saving_ms, f.rank)
            for f in diagnosis.findings
        ),
        kernel_ms=_per_step(head, ((k.name, k.ts_us, k.dur_us) for k in head.kernels))
        if head.kernels
        else None,
        op_ms=_op_ms(head),
        notes=tuple(diagnosis.notes),
        set_apart=apart,
    )


def _headline(traces: Sequence[Trace], diagnosis: Diagnosis) -> Trace:
    """The trace the diagnosis speaks for (the slowest rank of several)."""
    if diagnosis.slowest_rank is None or len(traces) < 2:
        return traces[0]
    for position, t in enumerate(traces):
        if rank_of(t.info, position) == diagnosis.slowest_rank:
            return t
    return traces[0]


def _phases(typical: Sequence[StepBreakdown]) -> dict[str, tuple[float, ...]]:
    return {p.value: tuple(s.phase_ms.get(p, 0.0) for s in typical) for p in Phase}


def _per_step(
    trace: Trace, items: Iterable[tuple[str, float, float]]
) -> dict[str, tuple[float, ...]]:
    """Sum (name, ts_us, dur_us) items per typical step of `trace`, in ms, by name."""
    steps = trace.typical_steps
    starts = [s.ts_us for s in steps]
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(steps))
    for name, ts, dur in items:
        i = bisect_left(starts, ts + 1e-9) - 1  # the step this item starts in
        if 0 <= i < len(steps) and ts < steps[i].end_us:
            sums[name][i] += dur / 1e3
    return {name: tuple(v) for name, v in sums.items()}


def _op_ms(trace: Trace) -> dict[str, tuple[float, ...]] | None:
    """Host operators' self time per typical step (ProfilerStep# markers left out)."""
    from torchpace.trace.top import self_times_us

    ops = [o for o in trace.host_ops if o.kind == "op"]
    if not ops:
        return None
    own = self_times_us(ops)
    items = (
        (o.name, o.ts_us, t)
        for o, t in zip(ops, own, strict=True)
        if not o.name.startswith(STEP_MARKER)
    )
    return _per_step(trace, items)


def _from_report(path: str) -> Side:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        usual = [s for s in doc["breakdown"]["steps"] if not s.get("outlier")]
        steps = [s for s in usual if not s.get("warmup")] or usual
        apart = tuple(
            (int(s["index"]), str(s["outlier"]))
            for s in doc["breakdown"]["steps"]
            if s.get("outlier")
        )
        phases = {p.value: tuple(float(s["phase_ms"][p.value]) for s in steps) for p in Phase}
        findings = tuple(
            FindingRef(f["rule"], f["severity"], f["summary"], f.get("saving_ms"), f.get("rank"))
            for f in doc["findings"]
        )
        device = str(doc["header"]["device_kind"])
        ranks = max(1, len(doc.get("ranks") or []))
        step_ms = tuple(float(s["duration_ms"]) for s in steps)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TraceError(
            f"{path}: not a torchpace JSON report this version can read ({type(exc).__name__}: "
            f"{exc}); write one with 'torchpace analyze TRACE -o report.json'"
        ) from None
    note = "a JSON report holds no kernels or operators: only steps, phases and findings compare"
    return Side(
        path, "report", device, ranks, step_ms, phases, findings, notes=(note,), set_apart=apart
    )
