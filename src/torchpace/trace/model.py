"""The Trace: one rank's recorded events (Recording) plus what its steps say, and build_trace."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import cached_property

from torchpace.trace.breakdown import compute_breakdown
from torchpace.trace.events import DeviceProperties, Step
from torchpace.trace.gpu import device_us_per_step, unrecorded_lead
from torchpace.trace.info import main_thread, make_info, steps_of
from torchpace.trace.normalize import copy_directions
from torchpace.trace.partial import Partial
from torchpace.trace.recording import Recording
from torchpace.trace.sanity import as_measured, unmeasured_notes
from torchpace.trace.stats import median
from torchpace.trace.summary import Breakdown, Phase


class Trace(Recording):
    """One rank's trace, normalised: its events and lookups (Recording), and what the steps say.

    Build it with `torchpace.trace.load_trace`. The breakdown is computed on first use and cached.
    """

    @cached_property
    def breakdown(self) -> Breakdown:
        """Per-step phase times, GPU busy time and kernel classes (computed once)."""
        return compute_breakdown(self)

    @property
    def typical_steps(self) -> list[Step]:
        """The steps of `Breakdown.typical` (steady and not outliers, else every step)."""
        typical = {s.index for s in self.breakdown.typical}
        return [s for s in self.steps if s.index in typical]

    @property
    def warmup_only(self) -> bool:
        """Whether every step is warm-up or a one-off phase (CUDA graph capture, cuDNN autotuning,
        CUDA set-up): the trace shows no steady state, and `typical_steps` are those phases."""
        return bool(self.steps) and all(s.warmup for s in self.steps)

    def median_step_ms(self) -> float:
        """Median duration of typical steps, in milliseconds."""
        return self.breakdown.median_step_ms

    def median_step_fraction(self, phase: Phase | str) -> float:
        """The phase's share (0..1) of the median step."""
        return self.breakdown.phase_share(Phase(phase))


def median_per_step(trace: Trace, items: Iterable[tuple[float, float]]) -> float:
    """Median over typical steps of the per-step sum of (ts_us, value) pairs; 0 without steps."""
    totals = step_sums(trace.typical_steps, items)
    return median(totals) if totals else 0.0


def step_sums(steps: Sequence[Step], items: Iterable[tuple[float, float]]) -> list[float]:
    """The sum of the (ts_us, value) pairs inside each of `steps` (sorted by start)."""
    starts = [s.ts_us for s in steps]
    totals = [0.0] * len(steps)
    for ts, value in items:
        i = bisect_right(starts, ts) - 1
        if i >= 0 and ts <= steps[i].end_us:
            totals[i] += value
    return totals


def _lead_note(part: Partial, steps: int) -> list[str]:
    """A note when the trace opens on device work started long after its call (unrecorded_lead):
    whether that lead counts as busy, and why."""
    lanes = [lane[0] for lane in (part.kernels, part.copies, part.memsets) if lane]
    if not lanes:
        return []
    first = min(lanes, key=lambda g: g.ts_us)
    # By start: the call that issued the first device work is among the first calls.
    call = next((c for c in part.runtime if c.correlation == first.correlation), None)
    per_step = device_us_per_step((part.kernels, part.copies, part.memsets), steps)
    lead = unrecorded_lead(first, call, per_step) if first.correlation is not None else None
    if lead is None:
        return []
    opens = (
        f"its first ({first.name[:40]}) started {(lead.span[1] - lead.span[0]) / 1e3:.1f} ms "
        "after the call that issued it"
    )
    if lead.counted:
        return [
            f"the trace opens on device work it did not record: {opens}; those ms count as GPU "
            f"busy, not idle: {lead.evidence}"
        ]
    return [
        f"the trace's first device work started late: {opens}; those ms are not counted as "
        f"GPU busy: {lead.evidence}"
    ]


def build_trace(part: Partial, path: str) -> Trace:
    """The Trace of a whole file's normalised events."""
    devices = tuple(
        DeviceProperties(
            d.id,
            d.name,
            d.totalGlobalMem,
            (d.computeMajor, d.computeMinor)
            if d.computeMajor is not None and d.computeMinor is not None
            else None,
            d.numSms,
        )
        for d in part.header.deviceProperties or []
    )
    host = part.host
    main_tid = main_thread(host)
    copies = copy_directions(part.copies, part.runtime)
    found = steps_of(host, (part.kernels, copies, part.memsets), main_tid, part.runtime)
    steps = as_measured(found.steps)
    has_gpu = bool(part.kernels or part.copies or part.memsets)
    info = make_info(part, path, devices, has_gpu=has_gpu)
    unmeasured = unmeasured_notes(steps, host, (part.kernels, copies, part.memsets))
    info = replace(
        info,
        step_source=found.source,
        step_detail=found.detail,
        notes=(*found.notes, *info.notes, *unmeasured, *_lead_note(part, len(found.steps))),
    )
    return Trace(
        info=info,
        steps=steps,
        host_ops=host,
        python_frames=part.python,
        runtime=part.runtime,
        kernels=part.kernels,
        copies=copies,
        memsets=part.memsets,
        syncs=part.syncs,
        gpu_annotations=part.gpu_annotations,
        memory=part.memory,
        devices=devices,
        main_tid=main_tid,
    )
