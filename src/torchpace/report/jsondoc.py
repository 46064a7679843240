"""The JSON report: a versioned document, a unit in every key, keys in a fixed order.

The shape is documented in docs/cli.md; bump doctor.diagnosis.SCHEMA_VERSION when it changes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from torchpace import __version__
from torchpace.doctor.diagnosis import SCHEMA_VERSION, Diagnosis, RankView
from torchpace.doctor.finding import EvidenceValue, Finding, Skipped, sort_findings
from torchpace.report import account, facts, memory
from torchpace.trace.labels import UserLabels
from torchpace.trace.summary import Breakdown, Phase, StepBreakdown, TraceInfo, rank_of

if TYPE_CHECKING:
    from torchpace.doctor.verification import ArmFigures, MeasuredSaving, Verification
    from torchpace.runner.conditions import RunConditions

Json = dict[str, Any]


def render_json(diagnosis: Diagnosis) -> str:
    """The report as pretty-printed JSON (always valid: NaN and infinities become null)."""
    return json.dumps(to_document(diagnosis), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def to_document(diagnosis: Diagnosis) -> Json:
    """The report as JSON-ready plain data."""
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "torchpace",
        "version": __version__,
        **({"caveat": diagnosis.caveat} if diagnosis.caveat else {}),
        "header": header(diagnosis.info, diagnosis.breakdown, facts.trace_files(diagnosis)),
        **({"run_account": account.document(diagnosis.account)} if diagnosis.account else {}),
        "breakdown": breakdown(diagnosis.breakdown),
        "user_labels": user_labels(diagnosis.labels),
        "findings": [finding(f, diagnosis) for f in sort_findings(list(diagnosis.findings))],
        "skipped": [skipped(s) for s in diagnosis.skipped],
        **({"memory": memory.document(diagnosis.memory)} if diagnosis.memory else {}),
        "ranks": [rank(view, rank_of(view.info, i)) for i, view in enumerate(diagnosis.ranks)],
        "slowest_rank": diagnosis.slowest_rank,
        "notes": facts.notes(diagnosis),
        **({"run_conditions": conditions(diagnosis.conditions)} if diagnosis.conditions else {}),
        **(
            {"verification": verification(diagnosis.verification)} if diagnosis.verification else {}
        ),
    }


def conditions(c: RunConditions) -> Json:
    """`torchpace doctor` only: the machine's load and the profiler's cost, units in the keys."""
    return {
        "usable_cores": c.usable_cores,
        "others_cores": _num(c.others_cores),
        "load_average": _num(c.load_average),
        "profiled_step_ms": _num(c.profiled_step_ms),
        "unprofiled_step_ms": _num(c.unprofiled_step_ms),
        "unprofiled_steps": c.unprofiled_steps,
        "profiler_inflation_ratio": _num(c.inflation),
        "profiler_cost_unmeasured": c.cost_unmeasured or None,
        "noisy_reasons": c.reasons(),
    }


def header(info: TraceInfo, bd: Breakdown, files: list[str]) -> Json:
    """What was measured, each key with its unit."""
    capability = info.compute_capability
    return {
        "trace_files": files,
        "device_kind": info.device_kind,
        "device_name": info.device_name,
        "compute_capability": f"{capability[0]}.{capability[1]}" if capability else None,
        "compute_capability_source": info.compute_capability_source,
        "device_memory_bytes": info.device_memory_bytes,
        "torch_version": info.torch_version,
        "trace_format": info.vintage or None,
        "rank": info.rank,
        "world_size": info.world_size,
        "backend": info.backend,
        "step_source": info.step_source,
        "step_detection": facts.steps(info, bd),
        "step_count": len(bd.steps),
        "warmup_step_count": sum(1 for s in bd.steps if s.warmup),
        "median_step_ms": _num(bd.median_step_ms),
        "gpu_busy_fraction": _num(bd.gpu_busy_fraction),
        "sm_efficiency_fraction": _num(bd.sm_efficiency),
        "achieved_occupancy_fraction": _num(bd.achieved_occupancy),
        "timestamp_unit": info.timestamp_unit,
        "event_count": info.event_count,
        "record_shapes": info.record_shapes,
        "profile_memory": info.profile_memory,
    }


def breakdown(bd: Breakdown) -> Json:
    """Medians per phase (ms and fraction of the median step) and every step."""
    return {
        "median_step_ms": _num(bd.median_step_ms),
        "median_phase_ms": {p.value: _num(bd.median_phase_ms.get(p, 0.0)) for p in Phase},
        "median_phase_fraction": {p.value: _num(bd.phase_share(p)) for p in Phase},
        "gpu_busy_fraction": _num(bd.gpu_busy_fraction),
        "sm_efficiency_fraction": _num(bd.sm_efficiency),
        "achieved_occupancy_fraction": _num(bd.achieved_occupancy),
        "kernel_ms_by_class": (
            {k: _num(v) for k, v in bd.kernel_ms_by_class.items()}
            if bd.kernel_ms_by_class is not None
            else None
        ),
        "steps": [step(s) for s in bd.steps],
    }


def step(s: StepBreakdown) -> Json:
    """One step's durations; `warmup` and `outlier` say why it is not typical ("" when it is)."""
    return {
        "index": s.index,
        "start_us": _num(s.start_us),
        "duration_ms": _num(s.duration_ms),
        "phase_ms": {p.value: _num(s.phase_ms.get(p, 0.0)) for p in Phase},
        "gpu_busy_ms": _num(s.gpu_busy_ms),
        "gpu_idle_fraction": _num(s.gpu_idle_fraction),
        "sm_efficiency_fraction": _num(s.sm_efficiency),
        "achieved_occupancy_fraction": _num(s.achieved_occupancy),
        "outlier": s.outlier,
        "warmup": s.warmup,
    }


def user_labels(labels: UserLabels | None) -> Json | None:
    """The user's record_function labels in tree order (`path`: the enclosing labels, outermost
    first, then the label); null when the trace has none."""
    if labels is None:
        return None
    return {
        "steps_count": labels.steps,
        "device_time_method": labels.device_method or None,
        "labels": [
            {
                "name": row.name,
                "path": list(row.path),
                "calls_per_step_count": _num(row.calls),
                "host_ms": _num(row.host_ms),
                "device_ms": _num(row.device_ms),
                "steps_seen_count": row.steps_seen,
            }
            for row in labels.rows
        ],
    }


def finding(f: Finding, diagnosis: Diagnosis) -> Json:
    """One finding; `saving_fraction` is saving_ms over the median step it was measured against."""
    step_ms, _ = facts.baseline(f, diagnosis)
    return {
        "rule": f.rule,
        "severity": f.severity.label,
        "summary": f.summary,
        "evidence": _evidence(f.evidence),
        "saving_ms": _num(f.saving_ms),
        "saving_fraction": _num(f.saving_fraction),
        "baseline_step_ms": _num(step_ms),
        "saving_method": f.saving_method,
        "fix": f.fix,
        "locations": [
            {"file": loc.file, "line": loc.line, "function": loc.function, "count": loc.count}
            for loc in f.locations
        ],
        "rank": f.rank,
        "caveat": f.caveat,
        "measured": measured(f.measured, f.saving_ms) if f.measured is not None else None,
    }


def arm_figures(a: ArmFigures) -> Json:
    """One measured arm against the plain script: step times (median and run range), speedup."""
    return {
        "fix": a.label,
        "baseline_step_ms": _num(a.baseline_ms),
        "baseline_step_range_ms": [_num(a.baseline_low_ms), _num(a.baseline_high_ms)],
        "fixed_step_ms": _num(a.fixed_ms),
        "fixed_step_range_ms": [_num(a.fixed_low_ms), _num(a.fixed_high_ms)],
        "speedup_ratio": _num(a.speedup),
        "speedup_interval_ratio": [_num(a.speedup_low), _num(a.speedup_high)],
        "saving_ms": _num(a.saving_ms),
        "saving_interval_ms": [_num(a.saving_low_ms), _num(a.saving_high_ms)],
        "verdict": a.verdict,
        "runs_count": a.runs,
        "flags": list(a.flags),
    }


def measured(m: MeasuredSaving, estimate_ms: float | None) -> Json:
    """What `doctor --verify` measured for a finding; `estimate_error_fraction` is (estimated -
    measured) / measured, only when the fix helped (an error against noise means nothing)."""
    saving = m.saving_ms
    error = (estimate_ms - saving) / saving if estimate_ms is not None and saving else None
    return {
        "status": m.status,
        "fix": m.fix,
        "numerics_change": m.numerics or None,
        "saving_ms": _num(saving),
        "estimate_error_fraction": _num(error),
        "best": arm_figures(m.best) if m.best is not None else None,
        "tried": [arm_figures(t) for t in m.tried],
        "note": m.note,
    }


def verification(v: Verification) -> Json:
    """`doctor --verify`: the window, the plain script unprofiled and profiled, all safe fixes."""
    return {
        "warmup_steps_count": v.warmup_steps,
        "timed_steps_count": v.steps,
        "rounds_count": v.rounds,
        "baseline_step_ms": _num(v.baseline_ms) if v.baseline_ms > 0 else None,
        "baseline_step_range_ms": [_num(v.baseline_low_ms), _num(v.baseline_high_ms)],
        "profiled_step_ms": _num(v.profiled_step_ms),
        "profiler_inflation_ratio": _num(v.profiler_ratio),
        "combined": arm_figures(v.combined) if v.combined is not None else None,
        "combined_fixes": list(v.combined_fixes),
        "machine_load": v.load,
        "load_warning": v.load_warning or None,
        "not_measured_for_time": list(v.not_measured),
        "failed": [{"fix": fix, "why": why} for fix, why in v.failed],
        "notes": list(v.notes),
        "total_s": _num(v.total_s),
        "budget_s": _num(v.budget_s),
    }


def skipped(s: Skipped) -> Json:
    """A rule that could not run, and what would let it run."""
    return {"rule": s.rule, "reason": s.reason, "enable": s.enable}


def rank(view: RankView, rank_id: int) -> Json:
    """One rank's header and breakdown (multi-rank input); `rank` is its position if unrecorded.

    `work_ms` (median step minus exposed collective wait) is what names the slowest rank.
    """
    work = view.work
    return {
        "rank": rank_id,
        "work_ms": _num(work.work_ms) if work is not None else None,
        "collective_wait_ms": _num(work.wait_ms) if work is not None else None,
        "header": header(view.info, view.breakdown, [view.info.path]),
        "breakdown": breakdown(view.breakdown),
    }


def _evidence(evidence: Mapping[str, EvidenceValue]) -> Json:
    return {key: _clean(value) for key, value in evidence.items()}


def _clean(value: EvidenceValue) -> Any:
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _num(value: float | None) -> float | None:
    """Six decimals (no float noise like 12.300000000000001); None for NaN and infinities."""
    if value is None or not math.isfinite(value):
        return None
    if isinstance(value, int):
        return value
    return round(value, 6)
