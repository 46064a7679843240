"""The doctor's own torch.profiler window: what it records, how far it may grow, what it writes.

What to record is one policy (`recording_for`): input shapes, Python stacks and memory events only
serve the GPU rules (tensor cores and precision, source lines of syncs and copies, allocator
churn), so a CPU-only run records none of them. They cost the most host memory: on torch 2.13, 10
steps of a small GPT grew the process by 440 MB with record_shapes and by 137 MB without.

The window is bounded whatever delimits steps (optimizer, DataLoader, backward or time windows):
by its duration, and by an estimate of its events from the growth of the process's private memory
since the profiler started (its heap, where the events live: shared memory, which a hogwild
script's model lives in and its workers write to, is not events). torch keeps 300-1,400 bytes per event while recording (measured on torch 2.13:
aten ops 520-1,400, Python frames 300-480), then `stop()` post-processes them into 1.3-3.4 KB each:
a bound on the estimated events is a bound on the memory `stop()` will need.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from torchpace.doctor.host import private_rss_bytes, rss_bytes

# Measured on torch 2.13 (CPU; benchmarks/bench_doctor.py --per-event): the least memory one event
# holds while recording (so growth / this over-counts events, never under-counts), and the most
# one event needs once stop() has post-processed it.
RECORDING_BYTES_PER_EVENT = {True: 300, False: 520}  # with Python stacks, without
STOPPED_BYTES_PER_EVENT = 3_400
# What the profiler takes as it starts (buffers), and what the script's own memory may grow by
# meanwhile, before growth counts as events.
_BASE = 96 << 20
_MiB = 1 << 20

Bound = Literal["events", "memory", "time"]


@dataclass(frozen=True)
class Recording:
    """What the profiler records besides host ops (and device activity where there is a GPU)."""

    cuda: bool
    shapes: bool
    stacks: bool
    memory: bool

    def describe(self) -> str:
        """What was recorded, for the report's notes."""
        extras = [n for n, on in (("shapes", self.shapes), ("Python stacks", self.stacks),
                                  ("memory events", self.memory)) if on]  # fmt: skip
        if extras:
            return "the profiler recorded host ops, device activity, " + ", ".join(extras)
        return (
            "the profiler recorded host ops only (input shapes, Python stacks and memory events "
            "serve the GPU rules alone and cost host memory on a CPU run)"
        )


def recording_for(*, cuda: bool, world_size: int = 1, memory: bool = True) -> Recording:
    """The one policy for what to record: extras only where a rule reads them."""
    # Shapes also explain rank imbalance (sequence lengths) in multi-rank runs.
    return Recording(cuda=cuda, shapes=cuda or world_size > 1, stacks=cuda, memory=cuda and memory)


@dataclass(frozen=True)
class ProfileBounds:
    """How far the profiled window may grow before it is cut short (whole steps are kept).

    Args:
        max_bytes: memory stop() may need for the recorded events; None: half the process's
            memory when profiling starts plus 256 MiB (the doctor's peak then stays within 1.5x
            of the script's own plus a fixed allowance).
    """

    max_events: int = 1_000_000
    max_bytes: int | None = None
    max_seconds: float = 60.0

    def bytes_for(self, rss_at_start: int) -> int:
        """The memory budget for a window started when the process held `rss_at_start`."""
        if self.max_bytes is not None:
            return self.max_bytes
        return rss_at_start // 2 + 256 * _MiB


class ProfilerWindow:
    """One torch.profiler recording: start, mark steps, check bounds, stop, write a .json.gz."""

    def __init__(self, recording: Recording, bounds: ProfileBounds) -> None:
        self.recording = recording
        self.bounds = bounds
        self.prof: Any = None
        self.started_at = 0.0  # time.monotonic()
        self._rss0 = 0
        self._private0 = 0
        self._event_cap = bounds.max_events

    def start(self) -> None:
        """Start recording; every prof.step() marks a ProfilerStep#N."""
        from torch.profiler import ProfilerAction, ProfilerActivity, profile

        rec = self.recording
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if rec.cuda else [])
        prof = profile(
            activities=activities,
            record_shapes=rec.shapes,
            with_stack=rec.stacks,
            profile_memory=rec.memory,
            schedule=_always(ProfilerAction.RECORD),  # torch then marks each prof.step()
        )
        self._rss0 = rss_bytes()
        self._private0 = private_rss_bytes()
        budget = self.bounds.bytes_for(self._rss0)
        self._event_cap = min(self.bounds.max_events, budget // STOPPED_BYTES_PER_EVENT)
        self.started_at = time.monotonic()
        prof.start()
        self.prof = prof  # only once started: stop() is then always safe

    def step(self) -> None:
        """A step ended: the next ProfilerStep# begins."""
        self.prof.step()

    def growth_bytes(self) -> int:
        """How much the process's private memory grew since recording started."""
        return max(0, private_rss_bytes() - self._private0)

    def estimated_events(self) -> int:
        """An upper estimate of the events recorded so far, from the memory they hold (the
        script's own growth over the fixed allowance counts too: an over-estimate)."""
        per_event = RECORDING_BYTES_PER_EVENT[self.recording.stacks]
        return max(0, self.growth_bytes() - _BASE) // per_event

    def over_bound(self) -> Bound | None:
        """Which bound the window has reached, if any (cheap; safe from any thread)."""
        if self.prof is None:
            return None
        if time.monotonic() - self.started_at >= self.bounds.max_seconds:
            return "time"
        events = self.estimated_events()
        if events >= self._event_cap:
            return "events" if self._event_cap == self.bounds.max_events else "memory"
        return None

    def describe_bound(self, bound: Bound) -> str:
        """Why the window was cut, in words."""
        if bound == "time":
            return f"the profiled window reached its {self.bounds.max_seconds:g} s bound"
        budget = self._event_cap * STOPPED_BYTES_PER_EVENT / _MiB
        grew = (
            f"the process's private memory grew {self.growth_bytes() / _MiB:,.0f} MiB while "
            f"profiling, read as up to {self.estimated_events():,} profiler events (the script's "
            "own growth counts too)"
        )
        if bound == "memory":
            return (
                f"{grew}, over the bound of about {self._event_cap:,} events "
                f"(~{budget:.0f} MiB once processed)"
            )
        return f"{grew}, over the bound of {self._event_cap:,} events"

    def stop(self) -> None:
        """Stop recording (the events stay in memory until export)."""
        prof = self.prof
        if prof is not None:
            prof.stop()

    def export(self, path: Path, finished: int) -> Path:
        """Write the trace gzip-compressed; a step cut short keeps its ops but loses its marker.

        Returns the path written (`path` ending in .json.gz).
        """
        from torchpace.doctor.tracefile import gzip_trace

        raw = path.with_name(path.name.removesuffix(".gz") + ".part")
        try:
            self.prof.export_chrome_trace(str(raw))
        except BaseException:
            if raw.exists():
                os.unlink(raw)
            raise  # the events are kept: the caller may try another folder
        self.prof = None  # the recorded events are freed here, before compression
        unfinished = f"ProfilerStep#{finished}"
        try:
            gzip_trace(raw, path, rename={unfinished: f"unfinished step ({unfinished})"})
        finally:
            os.unlink(raw)
        return path

    def discard(self) -> None:
        """Stop and drop the recording (a stronger step signal, or another profiler, took over)."""
        try:
            self.stop()
        finally:
            self.prof = None


def _always(action: Any) -> Any:
    def schedule(step: int) -> Any:
        return action

    return schedule
