"""The doctor's own torch.profiler window: what it records, how far it may grow, what it writes.

What to record is one policy (`recording_for`): input shapes, Python stacks and memory events only
serve the GPU rules (tensor cores and precision, source lines of syncs and copies, allocator
churn), so a CPU-only run records none of them. They cost the most host memory: on torch 2.13, 10
steps of a small GPT grew the process by 440 MB with record_shapes and by 137 MB without.

The window is bounded whatever delimits steps (optimizer, DataLoader, backward or time windows):
by its duration, and by the memory the recording and its `stop()` will hold, read from the growth
of the process's private memory since the profiler started (its heap, where the events live:
shared memory, which a hogwild script's model lives in and its workers write to, is left out).
`stop()` post-processes the events it holds, and that costs more than recording them, so the bound
counts both: growth so far, plus what `stop()` would add for the most events that growth can hold.
Measured on torch 2.13, CPU, glibc malloc, host ops only:
- a dense loop of small ops (tests/doctor/scripts/inference_loop.py): 276,495 events grew the
  process by 56 MiB after start() (212 bytes each), then `stop()` added 330 MB (1.25 KB each);
  unbounded, 1,755,283 events took 2.1 GB more in `stop()`;
- examples/naive_train.py: about 35,000 events grew it by 129 MiB, the small GPT (examples/
  gpt_train.py) about 2,300 events per step by 64 MiB per step, and `stop()` added nothing: there
  growth is mostly the script's freed tensors that glibc keeps between the profiler's small
  allocations (the same growth with a bare torch.profiler), not events.
Growth alone cannot tell these apart, so the estimate of events is an upper one: those GPT
windows are cut after a few steps rather than the dense loop taking the machine's memory.
Reading events from the heap in use instead (glibc's mallinfo2, uordblks + hblkhd, at step
boundaries; mid-step it also holds the step's activations: 296 MiB in the GPT) was tried and not
kept: events hold 204-218 bytes each there (GPT, naive_train, dense loop) and both examples keep
all 10 steps, but one 0.5 s time-window step of the dense loop records ~450,000 events between two
readings, so its peak reached 1.0-1.5 GB against 0.27 GB plain (stop() added 1.47 KB per event).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from torchpace.doctor.host import private_rss_bytes, rss_bytes

# The least memory one event held while recording (torch 2.13, CPU: 212 bytes in a dense loop of
# aten ops without shapes; Python frames 300-480): growth / this over-counts events.
RECORDING_BYTES_PER_EVENT = 200
# The most memory `stop()` added per event (torch 2.13: 1.3 KB for aten ops without shapes, up to
# 3.4 KB with shapes and Python stacks).
STOPPED_BYTES_PER_EVENT = {True: 3_400, False: 1_400}  # with shapes or Python stacks, without
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
        max_events: estimated events (an upper estimate: growth over the least memory an event
            holds); bounds the trace's size.
        max_bytes: growth of private memory while recording plus what stop() would add for the
            estimated events; None: half the process's memory when profiling starts plus 256 MiB
            (the doctor's peak then stays within 1.5x of the script's own plus that fixed
            allowance).
    """

    max_events: int = 2_000_000
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
        self._budget = 0  # bytes of growth allowed

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
        self._budget = self.bounds.bytes_for(self._rss0)
        self.started_at = time.monotonic()
        prof.start()
        # Growth counts from here: start()'s buffers (up to ~70 MiB on torch 2.13, CPU) are a
        # fixed cost, not events.
        self._private0 = max(self._private0, private_rss_bytes())
        self.prof = prof  # only once started: stop() is then always safe

    def step(self) -> None:
        """A step ended: the next ProfilerStep# begins."""
        self.prof.step()

    def growth_bytes(self) -> int:
        """How much the process's private memory grew since recording started."""
        return max(0, private_rss_bytes() - self._private0)

    def estimated_events(self) -> int:
        """An upper estimate of the events recorded so far, from the memory they hold (the
        script's own growth counts too: an over-estimate)."""
        return self.growth_bytes() // RECORDING_BYTES_PER_EVENT

    def projected_bytes(self) -> int:
        """Growth so far plus what stop() would add for the estimated events."""
        detailed = self.recording.stacks or self.recording.shapes
        return self.growth_bytes() + self.estimated_events() * STOPPED_BYTES_PER_EVENT[detailed]

    def over_bound(self) -> Bound | None:
        """Which bound the window has reached, if any (cheap; safe from any thread)."""
        if self.prof is None:
            return None
        if time.monotonic() - self.started_at >= self.bounds.max_seconds:
            return "time"
        if self.projected_bytes() >= self._budget:
            return "memory"
        if self.estimated_events() >= self.bounds.max_events:
            return "events"
        return None

    def describe_bound(self, bound: Bound) -> str:
        """Why the window was cut, in words."""
        if bound == "time":
            return f"the profiled window reached its {self.bounds.max_seconds:g} s bound"
        grew = f"the process's private memory grew {self.growth_bytes() / _MiB:,.0f} MiB while profiling"
        if bound == "memory":
            return (
                f"{grew} (the profiler's events and whatever the script allocated meanwhile): "
                f"with what stopping the profiler adds for up to {self.estimated_events():,} "
                f"events, over its bound of {self._budget / _MiB:,.0f} MiB (half the memory the "
                "process held when profiling started plus 256 MiB)"
            )
        return (
            f"{grew}: up to {self.estimated_events():,} events (an upper estimate), over the "
            f"bound of {self.bounds.max_events:,}"
        )

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
