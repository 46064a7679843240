"""What the HTML report draws, as plain data: a few typical steps' lanes, the GPU's idle split and
the memory curve of the headline trace.

Computed once by `diagnose(..., top=True)` (the HTML report asks for it) from the loaded trace and
its facts, so the report layer reads only the Diagnosis. Nothing here judges: the same phases
(trace/breakdown.py), idle causes (doctor/facts/idle.py) and memory events the rules read.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from torchpace.doctor.facts import facts_of
from torchpace.trace import intervals as iv
from torchpace.trace.breakdown import PRECEDENCE, phase_ranges, step_phase_ranges
from torchpace.trace.events import GpuEvent, MemoryTimeline, Step
from torchpace.trace.model import Trace

SHOWN_STEPS = 3  # typical steps drawn, those nearest the median step
DEVICE_LANES = 3  # the busiest streams
MEMORY_POINTS = 480  # the memory curve, thinned to this many points (peaks kept)
# Host spans closer than this share of their step merge; device lanes are cut into BINS (about
# a pixel each on the page).
MERGE_SHARE = 1 / 1200
BINS = 600


@dataclass(frozen=True)
class Span:
    """A labelled range of a lane, in milliseconds from its step's start."""

    start_ms: float
    end_ms: float
    label: str  # a phase ("forward", "sync", "dataloader") or a kernel class ("gemm")


@dataclass(frozen=True)
class Lane:
    name: str  # "host: training thread", "GPU stream 7"
    spans: tuple[Span, ...]


@dataclass(frozen=True)
class StepLanes:
    """One step drawn as lanes: the host's phases, then the device's streams; the host's waits
    on the device ("sync") and on the DataLoader ("dataloader") marked across every lane."""

    index: int
    duration_ms: float
    lanes: tuple[Lane, ...]
    marks: tuple[Span, ...]


@dataclass(frozen=True)
class MemoryCurve:
    """Allocated and reserved memory over the profiled window (reserved None where unrecorded)."""

    device: str  # "GPU" or "CPU"
    ms: tuple[float, ...]  # from the first step's start
    allocated_mb: tuple[float, ...]
    reserved_mb: tuple[float, ...] | None
    step_starts_ms: tuple[tuple[int, float], ...]  # (step index, its start)


@dataclass(frozen=True)
class Pictures:
    steps: tuple[StepLanes, ...] = ()
    idle_ms_by_cause: Mapping[str, float] | None = None  # per median step; None on CPU
    memory: MemoryCurve | None = None


def pictures(trace: Trace) -> Pictures:
    """The headline trace's pictures (see the module doc)."""
    split = facts_of(trace).idle_split() if trace.has_gpu else None
    return Pictures(
        steps=tuple(step_lanes(trace, s) for s in shown_steps(trace)),
        idle_ms_by_cause=dict(split.by_cause_ms) if split is not None else None,
        memory=memory_curve(trace),
    )


def shown_steps(trace: Trace, count: int = SHOWN_STEPS) -> list[Step]:
    """The typical steps nearest the median step, in trace order."""
    median_us = trace.breakdown.median_step_ms * 1e3
    near = sorted(trace.typical_steps, key=lambda s: abs(s.dur_us - median_us))[:count]
    return sorted(near, key=lambda s: s.ts_us)


def _spans(ranges: list[iv.Interval], lo: float, label: str, merge_us: float) -> list[Span]:
    """Disjoint sorted ranges as spans from `lo`, neighbours closer than `merge_us` joined."""
    out: list[iv.Interval] = []
    for s, e in ranges:
        if out and s - out[-1][1] < merge_us:
            out[-1] = (out[-1][0], max(e, out[-1][1]))
        else:
            out.append((s, e))
    return [Span((s - lo) / 1e3, (e - lo) / 1e3, label) for s, e in out]


def _phase_spans(trace: Trace, step: Step, merge_us: float) -> list[Span]:
    """The step's host phases after precedence (the breakdown's own rule), OTHER left blank."""
    lo, hi = step.ts_us, step.end_us
    ranges = step_phase_ranges(phase_ranges(trace), lo, hi)
    claimed: list[iv.Interval] = []
    spans: list[Span] = []
    for phase in PRECEDENCE:
        mine = iv.subtract(iv.union(ranges.get(phase, [])), claimed)
        spans += _spans(mine, lo, phase.value, merge_us)
        claimed = iv.union([*claimed, *mine])
    return sorted(spans, key=lambda s: s.start_ms)


def _device_lanes(trace: Trace, step: Step) -> list[Lane]:
    """The busiest streams' work in the step (see _binned)."""
    lo, hi = step.ts_us, step.end_us
    by_stream: dict[int, list[GpuEvent]] = defaultdict(list)
    for g in trace.gpu_events:
        if g.end_us > lo and g.ts_us < hi:
            by_stream[g.stream].append(g)
    busiest = sorted(by_stream, key=lambda k: -sum(g.dur_us for g in by_stream[k]))
    return [
        Lane(f"GPU stream {stream}", tuple(_binned(by_stream[stream], lo, hi)))
        for stream in sorted(busiest[:DEVICE_LANES])
    ]


def _binned(work: list[GpuEvent], lo: float, hi: float) -> list[Span]:
    """A stream's work at the page's resolution: the step cut into BINS, each bin busy (labelled
    by the kernel class that filled most of it) when work covers half of it, runs joined. A step
    holds thousands of kernels; the picture holds at most BINS spans per lane."""
    width = (hi - lo) / BINS
    fill: list[dict[str, float]] = [defaultdict(float) for _ in range(BINS)]
    for g in work:
        label: str = (g.klass or "other") if g.kind == "kernel" else "copy"
        s, e = max(g.ts_us, lo), min(g.end_us, hi)
        for b in range(int((s - lo) / width), min(BINS, int((e - lo) / width) + 1)):
            fill[b][label] += min(e, lo + (b + 1) * width) - max(s, lo + b * width)
    labels = [max(f, key=f.__getitem__) if sum(f.values()) >= width / 2 else "" for f in fill]
    spans: list[Span] = []
    for b, label in enumerate(labels):
        if not label:
            continue
        start, end = b * width / 1e3, (b + 1) * width / 1e3
        if spans and spans[-1].label == label and abs(spans[-1].end_ms - start) < 1e-9:
            spans[-1] = Span(spans[-1].start_ms, end, label)
        else:
            spans.append(Span(start, end, label))
    return spans


def _marks(trace: Trace, step: Step, merge_us: float) -> list[Span]:
    """Where the training thread waited on the device (syncs) or the DataLoader."""
    lo, hi = step.ts_us, step.end_us
    syncs = iv.union(iv.clip([(p.ts_us, p.end_us) for p in facts_of(trace).sync_points], lo, hi))
    data = iv.union(phase_ranges(trace).within(phase_ranges(trace).dataloader, lo, hi))
    return _spans(syncs, lo, "sync", merge_us) + _spans(data, lo, "dataloader", merge_us)


def step_lanes(trace: Trace, step: Step) -> StepLanes:
    """One step's lanes and marks (see StepLanes)."""
    merge_us = step.dur_us * MERGE_SHARE
    host = Lane("host: training thread", tuple(_phase_spans(trace, step, merge_us)))
    lanes = [host, *(_device_lanes(trace, step) if trace.has_gpu else [])]
    marks = tuple(_marks(trace, step, merge_us))
    return StepLanes(step.index, step.dur_us / 1e3, tuple(lanes), marks)


def _thinned(mem: MemoryTimeline, points: int) -> list[int]:
    """Row positions to keep: each bucket's highest allocated and highest reserved row."""
    n = len(mem)
    if n <= points:
        return list(range(n))
    keep: set[int] = set()
    size = math.ceil(n / (points // 2))
    for start in range(0, n, size):
        rows = range(start, min(n, start + size))
        keep.add(max(rows, key=mem.total_allocated.__getitem__))
        keep.add(max(rows, key=lambda i: _finite(mem.total_reserved[i])))
    return sorted(keep)


def _finite(x: float) -> float:
    return x if math.isfinite(x) else -1.0


def memory_curve(trace: Trace) -> MemoryCurve | None:
    """The device's memory over the trace (the host's when only it is recorded); None when the
    trace holds no memory events (profile_memory=False) or no steps to place them against."""
    mem, device = trace.device_memory, "GPU"
    if not len(mem):
        mem, device = trace.memory, "CPU"
    if len(mem):  # one device's curve: the one with the most events
        ids = mem.device_id
        most = max(set(ids), key=ids.count)
        mem = mem.where([d == most for d in ids]).in_time_order()
    if not len(mem) or not trace.steps or not all(map(math.isfinite, mem.total_allocated)):
        return None
    rows = _thinned(mem, MEMORY_POINTS)
    t0 = trace.steps[0].ts_us
    reserved = [mem.total_reserved[i] / 2**20 for i in rows]
    return MemoryCurve(
        device=device,
        ms=tuple((mem.ts_us[i] - t0) / 1e3 for i in rows),
        allocated_mb=tuple(mem.total_allocated[i] / 2**20 for i in rows),
        reserved_mb=tuple(reserved)
        if all(map(math.isfinite, reserved)) and any(reserved)
        else None,
        step_starts_ms=tuple((s.index, (s.ts_us - t0) / 1e3) for s in trace.steps),
    )


__all__ = ["Lane", "MemoryCurve", "Pictures", "Span", "StepLanes", "pictures"]
