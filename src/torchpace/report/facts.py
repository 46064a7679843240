"""What every human-readable report says, as rows of strings; text, rich and Markdown lay them out.

Keeping the wording here means the terminal, a CI comment and the HTML page say the same things.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from torchpace.doctor.diagnosis import Diagnosis, RankView, baseline_position
from torchpace.doctor.finding import Finding
from torchpace.report import units
from torchpace.trace.labels import UserLabels
from torchpace.trace.stats import fmt_bytes
from torchpace.trace.summary import (
    Breakdown,
    Phase,
    StepBreakdown,
    StepSource,
    TraceInfo,
    rank_of,
)

if TYPE_CHECKING:
    from torchpace.runner.conditions import RunConditions

# Reports show every step in a table up to this many steps; beyond it, only the outliers.
MAX_STEP_ROWS = 12
# The user-label table shows this many labels (tree order); the JSON report lists every one.
MAX_LABEL_ROWS = 30

STEP_SOURCES: dict[StepSource, str] = {
    "profiler-step": "ProfilerStep# markers (prof.step())",
    "optimizer": "inferred from Optimizer.step calls (no ProfilerStep# markers)",
    "dataloader": "inferred from DataLoader batches (no ProfilerStep# markers)",
    "backward": "inferred from backward passes (no ProfilerStep# markers)",
    "window": "none marked (no ProfilerStep# events): the whole trace is analysed as one window",
}

PHASE_LABELS: dict[Phase, str] = {
    Phase.DATALOADER: "data loading",
    Phase.H2D: "host-to-device copy",
    Phase.SYNC: "waiting for the GPU",
    Phase.FORWARD: "forward",
    Phase.BACKWARD: "backward",
    Phase.OPTIMIZER: "optimizer",
    Phase.OTHER: "other",
}

KIND_LABELS = {"cpu": "CPU only", "cuda": "CUDA", "rocm": "ROCm"}


def trace_files(diagnosis: Diagnosis) -> list[str]:
    """The files the report was made from."""
    return list(diagnosis.trace_files) or [diagnosis.info.path]


def trace_files_text(diagnosis: Diagnosis) -> str:
    """The files in one line; many rank files are summarised by their directory."""
    files = trace_files(diagnosis)
    if len(files) <= 3:
        return ", ".join(files)
    try:
        folder = os.path.commonpath(files) or "."
    except ValueError:  # absolute and relative paths mixed
        folder = "several folders"
    return f"{len(files)} files in {folder}: {files[0]}, ..., {files[-1]}"


def subject(diagnosis: Diagnosis) -> str:
    """What the report is about: the script the doctor ran, else the trace file or its folder."""
    if diagnosis.script:
        return diagnosis.script
    files = trace_files(diagnosis)
    if len(files) == 1:
        return files[0]
    try:
        folder = os.path.commonpath(files) or "."
    except ValueError:  # absolute and relative paths mixed
        return f"{len(files)} traces"
    return f"{folder.rstrip(os.sep)}{os.sep} ({len(files)} traces)"


def breakdown_title(diagnosis: Diagnosis) -> str:
    """The breakdown section's title; for several ranks it names the rank it shows."""
    by_work = " by work" if any(v.work is not None for v in diagnosis.ranks) else ""
    rank = f" on rank {diagnosis.slowest_rank}, the slowest{by_work}" if diagnosis.ranks else ""
    if diagnosis.info.step_source == "window":
        return f"Where the time goes{rank} (the whole trace as one window, host timeline)"
    return f"Where the step time goes{rank} (median per step, host timeline)"


def device(info: TraceInfo) -> str:
    """The device in one phrase: 'Tesla V100-SXM2-32GB (CUDA, compute capability 7.0, 32.0 GiB)' or 'CPU only'."""
    if info.device_kind == "cpu":
        return "CPU only (no device activity in the trace)"
    details = [KIND_LABELS.get(info.device_kind, info.device_kind)]
    if info.compute_capability is not None:
        major, minor = info.compute_capability
        inferred = info.compute_capability_source == "kernel names"
        details.append(
            f"compute capability {major}.{minor}"
            + (" or newer, read from kernel names" if inferred else "")
        )
    if info.device_memory_bytes:
        details.append(fmt_bytes(info.device_memory_bytes))
    name = info.device_name or "unnamed device"
    return f"{name} ({', '.join(details)})"


def device_short(info: TraceInfo) -> str:
    """The device in a few words, for the baseline beside a saving."""
    if info.device_kind == "cpu":
        return "CPU"
    return info.device_name or KIND_LABELS.get(info.device_kind, info.device_kind)


def steps(info: TraceInfo, breakdown: Breakdown) -> str:
    """How many steps, how they were found, and which ones the medians leave out."""
    count = len(breakdown.steps)
    if info.step_source == "window":
        return STEP_SOURCES["window"] + _warmup_text(breakdown)
    if info.step_source != "profiler-step" and info.step_detail:
        found = info.step_detail
    else:
        found = f"{count}, from {STEP_SOURCES[info.step_source]}"
    outliers = sum(1 for s in breakdown.steps if s.outlier)
    typical = f"; {outliers} outlier{'s' if outliers != 1 else ''} left out of the medians"
    return found + _warmup_text(breakdown) + (typical if outliers else "")


def _warmup_text(breakdown: Breakdown) -> str:
    """'; step 0 is warm-up (...), left out of the medians' or ''."""
    warm = [s for s in breakdown.steps if s.warmup]
    if not warm:
        return ""
    if len(warm) == len(breakdown.steps):
        what = "the window is" if len(warm) == 1 else "no step is"
        return f"; {what} not steady state ({warmup_short(warm[0])})"
    which = ", ".join(str(s.index) for s in warm)
    are = "steps {} are" if len(warm) > 1 else "step {} is"
    return f"; {are.format(which)} {warmup_short(warm[0])}, left out of the medians"


def warmup_short(step: StepBreakdown) -> str:
    """A step's warm-up reason without the figures in parentheses (they stay in the JSON)."""
    return re.sub(r"\s*\([^)]*\)", "", step.warmup)


def header_rows(diagnosis: Diagnosis) -> list[tuple[str, str]]:
    """Label/value pairs stating what was measured."""
    info, breakdown = diagnosis.info, diagnosis.breakdown
    rows = [("Trace", trace_files_text(diagnosis)), ("Device", device(info))]
    if info.torch_version:
        rows.append(("PyTorch", info.torch_version))
    if info.vintage:
        rows.append(("Trace format", info.vintage))
    if diagnosis.ranks or (info.world_size or 1) > 1:
        rows.append(("Distributed", _distributed(info, diagnosis)))
    rows.append(("Steps", steps(info, breakdown)))
    label = "Window" if info.step_source == "window" else "Median step"
    rows.append((label, units.ms(breakdown.median_step_ms)))
    if breakdown.gpu_busy_fraction is not None:
        busy = breakdown.gpu_busy_fraction
        rows.append(("GPU busy", f"{units.share(busy)} of the step (idle {units.share(1 - busy)})"))
        rows += gpu_used_rows(breakdown)
    if info.event_count:
        rows.append(("Events", units.number(info.event_count)))
    if diagnosis.conditions is not None:
        rows += conditions_rows(diagnosis.conditions)
    return rows


def conditions_rows(c: RunConditions) -> list[tuple[str, str]]:
    """The machine's load and the profiler's own cost during a doctor run."""
    rows = []
    if c.others_cores is not None:
        cores = f" of {c.usable_cores}" if c.usable_cores else ""
        load = f", load average {c.load_average:.1f}" if c.load_average is not None else ""
        rows.append(
            (
                "Machine load",
                f"other processes kept {c.others_cores:.1f}{cores} cores busy while profiling{load}",
            )
        )
    inflation = c.inflation
    if inflation is not None and c.profiled_step_ms and c.unprofiled_step_ms:
        rows.append(
            (
                "Profiler cost",
                f"{inflation:.2f}x: a profiled step took {units.ms(c.profiled_step_ms)}, "
                f"the same steps unprofiled {units.ms(c.unprofiled_step_ms)} "
                f"(medians; {c.unprofiled_steps} unprofiled steps around the profiled ones)",
            )
        )
    else:
        why = c.cost_unmeasured or "no unprofiled step was timed"
        rows.append(("Profiler cost", f"not measured: {why}"))
    reasons = c.reasons()
    if reasons:
        rows.append(
            ("Timings", f"noisy: {' and '.join(reasons)}; time-based findings capped at MEDIUM")
        )
    return rows


def gpu_used_rows(breakdown: Breakdown) -> list[tuple[str, str]]:
    """How much of the GPU its kernels used, beside GPU busy: the TensorBoard profiler plugin's
    est. SM efficiency (of the step) and est. achieved occupancy (docs/trace.md)."""
    sm, occupancy = breakdown.sm_efficiency, breakdown.achieved_occupancy
    if sm is None and occupancy is None:
        return [("GPU used", "not in this trace (its kernels record no blocks per SM)")]
    parts = []
    if sm is not None:
        parts.append(f"SM efficiency {units.share(sm)} of the step")
    if occupancy is not None:
        parts.append(f"achieved occupancy {units.share(occupancy)}")
    return [("GPU used", ", ".join(parts) + " (est., from the kernels' launch figures)")]


def _distributed(info: TraceInfo, diagnosis: Diagnosis) -> str:
    # torch writes "undefined" for a process group it did not make with a backend
    backend = f", {info.backend}" if info.backend and info.backend != "undefined" else ""
    if diagnosis.ranks:
        world = f" of {info.world_size}" if info.world_size else ""
        return f"{len(diagnosis.ranks)}{world} ranks analysed{backend}"
    return f"rank {info.rank} of {info.world_size}{backend}"


def notes(diagnosis: Diagnosis) -> list[str]:
    """Notes from the trace engine and the diagnosis, without repeats."""
    seen: dict[str, None] = {}
    for note in (*diagnosis.info.notes, *diagnosis.notes):
        seen.setdefault(note, None)
    return list(seen)


def phase_rows(breakdown: Breakdown) -> list[tuple[str, float, float]]:
    """(phase label, median ms, share of the median step) for every phase that took time."""
    rows = []
    for phase in Phase:
        value = breakdown.median_phase_ms.get(phase, 0.0)
        if value > 0:
            rows.append((PHASE_LABELS[phase], value, breakdown.phase_share(phase)))
    return rows


def kernel_rows(breakdown: Breakdown) -> list[tuple[str, float, float]]:
    """(kernel class, median ms per step, share of the median step), largest first."""
    if not breakdown.kernel_ms_by_class:
        return []
    step = breakdown.median_step_ms
    items = sorted(breakdown.kernel_ms_by_class.items(), key=lambda kv: -kv[1])
    return [(name, value, value / step if step > 0 else 0.0) for name, value in items if value > 0]


def steps_title(breakdown: Breakdown, shown: list[StepBreakdown]) -> str:
    """The per-step table's title."""
    if len(shown) == len(breakdown.steps):
        return "Per step (ms)"
    what = "Warm-up and outlier" if any(s.warmup for s in shown) else "Outlier"
    return f"{what} steps (ms; {len(shown)} of {len(breakdown.steps)} steps)"


def step_phases(breakdown: Breakdown) -> list[Phase]:
    """The phases worth a column in the per-step table (those any step spent time in)."""
    return [p for p in Phase if any(s.phase_ms.get(p, 0.0) > 0 for s in breakdown.steps)]


def shown_steps(breakdown: Breakdown) -> list[StepBreakdown]:
    """Every step when there are few, otherwise only the warm-up and outlier ones."""
    if len(breakdown.steps) <= MAX_STEP_ROWS:
        return list(breakdown.steps)
    return [s for s in breakdown.steps if s.outlier or s.warmup]


def has_gpu(breakdown: Breakdown) -> bool:
    """Whether any step has device activity (the GPU busy column is shown only then)."""
    return any(s.gpu_busy_ms is not None for s in breakdown.steps)


def has_sm(breakdown: Breakdown) -> bool:
    """Whether any step has an SM efficiency (the column is shown only then)."""
    return any(s.sm_efficiency is not None for s in breakdown.steps)


def step_row(step: StepBreakdown, phases: list[Phase], *, gpu: bool, sm: bool = False) -> list[str]:
    """One step as table cells: index, total, each phase, GPU busy (if `gpu`), SM efficiency
    (if `sm`), outlier label."""
    cells = [str(step.index), _num(step.duration_ms)]
    cells += [_num(step.phase_ms.get(p, 0.0)) for p in phases]
    if gpu:
        busy = step.gpu_busy_ms
        ok = busy is not None and step.duration_ms > 0
        cells.append(
            units.share(min(1.0, busy / step.duration_ms)) if ok and busy is not None else ""
        )
    if sm:
        cells.append(units.share(step.sm_efficiency) if step.sm_efficiency is not None else "")
    cells.append(warmup_short(step) or step.outlier)
    return cells


def step_header(phases: list[Phase], *, gpu: bool, sm: bool = False) -> list[str]:
    """Column titles matching step_row."""
    extra = [*(["GPU busy"] if gpu else []), *(["SM eff."] if sm else [])]
    return ["step", "total", *(p.value for p in phases), *extra, "note"]


def _num(value: float) -> str:
    return units.ms(value).removesuffix(" ms")


def baseline(finding: Finding, diagnosis: Diagnosis) -> tuple[float, TraceInfo]:
    """The median step and the trace the finding's saving is measured against (its rank's)."""
    position = baseline_position(finding.rank, [view.info for view in diagnosis.ranks])
    view = diagnosis if position is None else diagnosis.ranks[position]
    return view.breakdown.median_step_ms, view.info


def saving(finding: Finding, diagnosis: Diagnosis) -> str:
    """'about 12.3 ms per step (26% of the 48.1 ms median step on Tesla V100); method: ...'."""
    if finding.saving_ms is None:
        # A rule whose saving is not time (out-of-memory: bytes) says what it is instead.
        return finding.saving_method or "not estimated (no honest estimate from this trace)"
    step_ms, info = baseline(finding, diagnosis)
    where = f"on {device_short(info)}"
    if finding.saving_fraction is not None:
        base = f"{units.share(finding.saving_fraction)} of the {units.ms(step_ms)} median step"
    else:
        base = "no median step to compare with"
    text = f"about {units.ms(finding.saving_ms)} per step ({base} {where})"
    return f"{text}; method: {finding.saving_method}" if finding.saving_method else text


def findings_title(diagnosis: Diagnosis) -> str:
    """The findings section's title, with the count."""
    count = len(diagnosis.findings)
    if count == 0:
        return "Findings: none - no rule found anything that slows these steps"
    return f"Findings ({count}), largest estimated saving first"


def rank_rows(ranks: tuple[RankView, ...], slowest: int | None) -> list[list[str]]:
    """One row per rank: rank, median step, its work and collective wait (when measured), each
    phase's median ms, GPU busy, slowest marker."""
    gpu = any(v.breakdown.gpu_busy_fraction is not None for v in ranks)
    work = any(v.work is not None for v in ranks)
    rows = []
    for position, view in enumerate(ranks):
        bd, rank = view.breakdown, rank_of(view.info, position)
        cells = [str(rank), _num(bd.median_step_ms)]
        if work:
            w = view.work
            cells += [_num(w.work_ms), _num(w.wait_ms)] if w is not None else ["", ""]
        cells += [_num(bd.median_phase_ms.get(p, 0.0)) for p in Phase]
        if gpu:
            busy = bd.gpu_busy_fraction
            cells.append(units.share(busy) if busy is not None else "")
        cells.append("slowest" if rank == slowest else "")
        rows.append(cells)
    return rows


def rank_header(ranks: tuple[RankView, ...]) -> list[str]:
    """Column titles matching rank_rows."""
    gpu = any(v.breakdown.gpu_busy_fraction is not None for v in ranks)
    work = ["work", "wait"] if any(v.work is not None for v in ranks) else []
    return ["rank", "step", *work, *(p.value for p in Phase), *(["GPU busy"] if gpu else []), ""]


def slowest_sentence(diagnosis: Diagnosis) -> str:
    """Name the slowest rank and how far it trails the fastest, by the measure that named it."""
    ranks = diagnosis.ranks
    if not ranks or diagnosis.slowest_rank is None:
        return ""
    works = {rank_of(v.info, i): v.work.work_ms for i, v in enumerate(ranks) if v.work is not None}
    if len(works) == len(ranks):
        return _slowest_by_work(diagnosis, works)
    by_rank = {rank_of(v.info, i): v.breakdown.median_step_ms for i, v in enumerate(ranks)}
    slow = by_rank.get(diagnosis.slowest_rank)
    fast_rank = min(by_rank, key=lambda r: by_rank[r])
    fast = by_rank[fast_rank]
    if slow is None:
        return f"Slowest rank: {diagnosis.slowest_rank}."
    gap = f", {units.share(slow / fast - 1)} above the fastest (rank {fast_rank}, {units.ms(fast)})"
    trail = gap if fast > 0 and fast_rank != diagnosis.slowest_rank else ""
    return f"Slowest rank: {diagnosis.slowest_rank}, median step {units.ms(slow)}{trail}."


def _slowest_by_work(diagnosis: Diagnosis, works: dict[int, float]) -> str:
    """Work compared with work; step times are named apart (waiting ranks have longer steps)."""
    slowest = diagnosis.slowest_rank
    assert slowest is not None
    slow = works[slowest]
    least = min(works, key=lambda r: works[r])
    text = (
        f"Slowest rank: {slowest} by work (median step minus time only waiting in collectives), "
        f"{units.ms(slow)} of work per step"
    )
    if least != slowest and works[least] > 0:
        text += (
            f", {units.share(slow / works[least] - 1)} more than the least-working rank "
            f"(rank {least}, {units.ms(works[least])})"
        )
    steps = [v.breakdown.median_step_ms for v in diagnosis.ranks]
    return (
        f"{text}. Median steps span {units.ms(min(steps))} to {units.ms(max(steps))}: "
        "ranks that wait for others in collectives have longer steps."
    )


def labels_title(labels: UserLabels) -> str:
    """The user-label section's title."""
    steps = f"{labels.steps} step{'s' if labels.steps != 1 else ''}"
    return f"Your labels (record_function ranges), median per step over {steps}"


def label_header(labels: UserLabels) -> list[str]:
    """Column titles matching label_rows."""
    device = ["device"] if labels.device_method else []
    return ["label", "calls", "host", *device]


def label_rows(labels: UserLabels) -> list[tuple[int, list[str]]]:
    """(depth in the tree, cells) per label shown: name, calls, host time, device time."""
    rows = []
    for row in labels.rows[:MAX_LABEL_ROWS]:
        cells = [row.name, _calls(row.calls), units.ms(row.host_ms)]
        if labels.device_method:
            cells.append(units.ms(row.device_ms) if row.device_ms is not None else "")
        rows.append((row.depth, cells))
    return rows


def labels_footer(labels: UserLabels) -> str:
    """What the table leaves out and how device time was measured ("" when nothing to say)."""
    parts = []
    more = len(labels.rows) - MAX_LABEL_ROWS
    if more > 0:
        parts.append(f"{more} more label{'s' if more > 1 else ''} in the JSON report")
    if labels.device_method:
        parts.append(labels.device_method)
    parts.append("times include nested labels")
    text = "; ".join(parts)
    return text[:1].upper() + text[1:] + "."


def _calls(value: float) -> str:
    return f"{value:g}" if value >= 1 or value == 0 else f"{value:.1f}"
