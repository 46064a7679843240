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
Growth alone cannot tell these apart, so where glibc's mallinfo2 can be read the events are
estimated from the heap in use at step boundaries (uordblks + hblkhd: live allocations, not the
freed memory malloc keeps; between steps the step's activations are freed too; 0.12 ms a reading):
events held 204-218 bytes each there (GPT, naive_train, dense loop). For the step under way the
estimate adds twice the largest finished step's heap growth, or the step's private growth beyond
twice the largest finished step's (a step far larger than the others: an evaluation loop inside
one step); before the first step ends it is private growth, as on other C libraries. With it
naive_train keeps its 10 steps (674 MB peak against 478 MB plain), the GPT 9-10 (1.5-1.7 GB
against 0.97 GB: real private growth, which the bound counts whole, ends some windows a step
early), and the dense loop stays bounded (its first 0.5 s time window is judged on private growth).
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from torchpace.runner.load import heap_in_use_bytes, private_rss_bytes, rss_bytes

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
        self._heap0: int | None = None  # heap in use when recording started (None: unreadable)
        # At each step boundary so far (the first: at start): growth of the heap in use, and
        # private memory then.
        self._heap_growth: list[int] = []
        self._private_at: list[int] = []

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
        self._heap0 = heap_in_use_bytes()
        self._mark_boundary()
        self.prof = prof  # only once started: stop() is then always safe

    def step(self) -> None:
        """A step ended: the next ProfilerStep# begins."""
        self.prof.step()
        self._mark_boundary()

    def _mark_boundary(self) -> None:
        """Read the heap in use between two steps, when the step's tensors are freed: its growth
        since the start is the events (and whatever the script keeps), not the freed memory
        malloc holds on to (0.12 ms a reading on torch 2.13's heap)."""
        if self._heap0 is None:
            return
        heap = heap_in_use_bytes()
        if heap is not None:
            self._private_at = [*self._private_at, private_rss_bytes()]
            self._heap_growth = [*self._heap_growth, max(0, heap - self._heap0)]

    def growth_bytes(self) -> int:
        """How much the process's private memory grew since recording started."""
        return max(0, private_rss_bytes() - self._private0)

    def estimated_events(self) -> int:
        """An upper estimate of the events recorded so far, from the memory they hold (the
        script's own growth counts too: an over-estimate). With the heap in use readable: its
        growth up to the last step boundary, plus, for the step under way, twice the largest
        finished step's growth, or its private growth beyond twice the largest step's (a step far
        larger than the others); before the first step ends, or without mallinfo2, the growth of
        private memory. Never above the latter."""
        upper = self.growth_bytes() // RECORDING_BYTES_PER_EVENT
        growth, private = self._heap_growth, self._private_at  # lists replaced whole
        if len(growth) < 2 or len(private) < len(growth):
            return upper
        largest = max(b - a for a, b in itertools.pairwise(growth))
        # The step under way: twice the largest finished step's, or, for a step far larger than
        # those before it (an evaluation loop inside one step), its private growth beyond twice
        # theirs.
        widest = max(b - a for a, b in itertools.pairwise(private[: len(growth)]))
        beyond = private_rss_bytes() - private[len(growth) - 1] - 2 * widest
        under_way = max(2 * largest, beyond)
        return min(upper, (growth[-1] + under_way) // RECORDING_BYTES_PER_EVENT)

    def estimate_method(self) -> str:
        """How estimated_events() read the memory, in words."""
        if len(self._heap_growth) < 2:
            return "from the growth of private memory"
        return (
            "from the heap in use at the last step boundary (glibc mallinfo2), plus, for the "
            "step under way, twice the largest step's growth or its private growth beyond twice "
            "the largest step's"
        )

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
                f"events ({self.estimate_method()}), over its bound of {self._budget / _MiB:,.0f} MiB (half the memory the "
                "process held when profiling started plus 256 MiB)"
            )
        return (
            f"{grew}: up to {self.estimated_events():,} events (an upper estimate "
            f"{self.estimate_method()}), over the "
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
        from torchpace.runner.tracefile import gzip_trace

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
