"""The doctor's own torch.profiler window: what it records, how far it may grow, what it writes.

What to record is one policy (`recording_for`): input shapes serve the GPU rules (tensor cores and
precision) and multi-rank runs; Python stacks and memory events serve the GPU rules (source lines
of syncs and copies, allocator churn) and the memory view, on CPU too unless --no-memory. They cost
the most host memory: on torch 2.13, 10 steps of a small GPT grew the process by 440 MB with
record_shapes and by 137 MB without.

The window is bounded whatever delimits steps (optimizer, DataLoader, backward or time windows):
by its duration, by its events, and by the profiler's own memory: what its events hold while it
records plus what `stop()` adds for them (it post-processes every event: 1.25-3.4 KB each on
torch 2.13, more than recording them). The events' memory is read where the script's own memory is
out of the way:
- at step boundaries, from the growth of the heap in use (glibc's mallinfo2: live allocations, not
  the freed memory malloc keeps; the step's activations are freed by then; 0.12 ms a reading), or
  of private memory where the heap cannot be read;
- inside a step, from the rise of the heap in use (of private memory where the heap cannot be
  read) beyond the script's own in-step rise, measured the same way during the unprofiled warm-up
  steps (`StepFootprint`): a real script's activations (100-300 MiB a step on the real scripts
  tried) are not events. Counting them as events (x8 with what stop() adds) stopped the window
  after 0-1 steps on 6 of 7 real scripts, at 0.9-1.5 GB on a 24 GB machine. Private memory is no
  measure of them when malloc holds freed memory: minGPT's chargpt.py held 3.8 GB free after its
  first steps, so its warm-up steps rose 32 MiB in private memory; profiled, the events split
  that free memory, its 1.5 GiB of activations took new pages, and the rise read as 2.2 million
  events (10,800 a step were recorded): cut after 3 of 10 steps.
At a boundary the window also ends when one more step like the median so far would pass a bound,
so it keeps whole steps; and malloc's free memory is given back there once it grew by 1/8 of the
process past what malloc held free at the start (the events pin freed activations in place).
Measured on torch 2.13, CPU, host ops only: a dense loop of small ops
(tests/doctor/scripts/inference_loop.py) records ~550,000 events a second, 212 bytes each, and
`stop()` added 1.25 KB each (unbounded, 1,755,283 events took 2.1 GB more in `stop()`); a training
step of examples/naive_train.py records ~3,500 events, the small GPT's ~2,300.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from torchpace.policy.window import MIN_STEPS
from torchpace.runner.load import (
    available_bytes,
    heap_in_use_bytes,
    private_rss_bytes,
    release_freed_memory,
    rss_bytes,
)

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
            ops = "host ops, device activity" if self.cuda else "host ops"
            return f"the profiler recorded {ops}, " + ", ".join(extras)
        return (
            "the profiler recorded host ops only (input shapes, Python stacks and memory events "
            "serve the GPU rules alone and cost host memory on a CPU run)"
        )


def recording_for(*, cuda: bool, world_size: int = 1, memory: bool = True) -> Recording:
    """The one policy for what to record: extras only where a rule or a view reads them."""
    # Shapes also explain rank imbalance (sequence lengths) in multi-rank runs. Memory events
    # feed the memory view, on CPU too (--no-memory: none). Python stacks only on a GPU: on a
    # CPU run they made PyG's GIN example's profiled steps 1.74-1.91x slower than unprofiled
    # (1.41-1.47x without them) and their memory cut its window at 9 of 10 steps.
    return Recording(cuda=cuda, shapes=cuda or world_size > 1, stacks=cuda, memory=memory)


@dataclass(frozen=True)
class ProfileBounds:
    """How far the profiled window may grow before it is cut short (whole steps are kept).

    Args:
        max_events: estimated events (an upper estimate from the memory they hold); bounds the
            trace's size.
        max_bytes: the profiler's own memory: what its events hold while recording plus what
            stop() adds for them; None: half the process's memory when profiling starts plus
            256 MiB (the doctor's peak then stays near 1.5x the script's), and never more than
            half the memory the machine (or its cgroup) has available then, shared by the
            ranks on this machine.
    """

    max_events: int = 2_000_000
    max_bytes: int | None = None
    max_seconds: float = 60.0

    def bytes_for(self, rss_at_start: int, available: int | None, local_ranks: int = 1) -> int:
        """The profiler's memory budget for a window started when the process held
        `rss_at_start` and the machine had `available` bytes free."""
        if self.max_bytes is not None:
            return self.max_bytes
        budget = rss_at_start // 2 + 256 * _MiB
        if available is not None:
            budget = min(budget, available // (2 * max(1, local_ranks)))
        return budget

    def machine_bytes(self, rss_at_start: int, available: int | None, local_ranks: int = 1) -> int:
        """The budget that keeps the machine up: half the memory it had available, shared by the
        ranks on it (the process's own budget where that is unknown or a bound was given). A
        window holds the steps it was asked for up to this one: under two busy loops accelerate's
        BERT example read 32 MiB of its own heap as 169,763 events (36,925 were recorded in 10
        steps on the run before) and its rank 0 was cut after 1 step, with 22 GB free."""
        if self.max_bytes is not None or available is None:
            return self.bytes_for(rss_at_start, available, local_ranks)
        return max(
            self.bytes_for(rss_at_start, available, local_ranks),
            available // (2 * max(1, local_ranks)),
        )


def in_use_bytes() -> int:
    """The memory the process's live allocations hold: the heap in use, else private memory (no
    glibc), the one measure a step's rise is read in, warm-up and profiled alike."""
    heap = heap_in_use_bytes()
    return heap if heap is not None else private_rss_bytes()


class StepFootprint:
    """The script's own memory in its unprofiled warm-up steps: how far its memory in use
    (`in_use_bytes`) rises inside a step (its activations, read at the watchdog's ticks), and
    how much the heap in use grows from one step boundary to the next (what it keeps: caches,
    metrics, a slow leak).

    While profiling, both are the script's, not the profiler's events: counted as events, a real
    script's 100-300 MiB of activations stopped the window after 0-1 steps, and accelerate's BERT
    example's 16 MiB a step kept by the script read as 173,213 events where 8,537 were recorded.
    Ticks sample the rise (a peak between two ticks is missed), so it is used with a margin."""

    def __init__(self) -> None:
        self._at_boundary: int | None = None
        self._high = 0
        self.rise = 0  # the largest rise seen within one step
        self._heap: list[int] = []  # heap in use at each warm-up boundary (glibc)

    def boundary(self) -> None:
        """A warm-up step ended."""
        if self._at_boundary is not None:
            self.rise = max(self.rise, self._high - self._at_boundary)
        heap = heap_in_use_bytes()
        self._at_boundary = self._high = heap if heap is not None else private_rss_bytes()
        if heap is not None:
            self._heap = [*self._heap[-4:], heap]

    def sample(self) -> None:
        """A tick inside a warm-up step."""
        if self._at_boundary is not None:
            self._high = max(self._high, in_use_bytes())

    def allowance(self) -> int:
        """The rise to leave to the script: what was seen, with half again and 32 MiB to spare."""
        return self.rise + self.rise // 2 + 32 * _MiB

    def kept_per_step(self) -> int:
        """The heap the script keeps per step, the median over the last warm-up steps (0 when
        fewer than two were read, or where the heap cannot be read)."""
        grown = sorted(max(0, b - a) for a, b in itertools.pairwise(self._heap))
        return grown[len(grown) // 2] if grown else 0


class ProfilerWindow:
    """One torch.profiler recording: start, mark steps, check bounds, stop, write a .json.gz."""

    def __init__(
        self, recording: Recording, bounds: ProfileBounds, *,
        script: StepFootprint | None = None, local_ranks: int = 1, hold: int = MIN_STEPS,
    ) -> None:  # fmt: skip
        self.recording = recording
        self.bounds = bounds
        # The steps held up to the machine's budget: the window asked for (--steps). At the
        # process's budget from MIN_STEPS, accelerate's gradient_accumulation.py (4 batches a
        # step, shapes recorded for 2 ranks) was cut after 7 of 10 steps with 22 GB free.
        self._hold = max(hold, MIN_STEPS)
        self.prof: Any = None
        self.started_at = 0.0  # time.monotonic()
        self._boundary_at = 0.0  # ...at the last step boundary
        # The script's own in-step rise, and the heap it keeps per step (none known: 0).
        self._script_rise = script.allowance() if script is not None else 0
        self._script_kept = script.kept_per_step() if script is not None else 0
        self._local_ranks = local_ranks
        self._private0 = 0
        self._budget = 0  # bytes the profiler's own memory may reach
        self._machine_budget = 0  # ...while the window holds fewer than its steps (`_hold`)
        self._heap0: int | None = None  # heap in use when recording started (None: unreadable)
        # At each step boundary (the first: at start): growth since the start of the heap in
        # use (of private memory where the heap cannot be read), and that memory then.
        self._growth: list[int] = []
        self._in_use_at: list[int] = []
        self._slack0 = 0  # free memory malloc held when recording started (private - heap)
        self._max_slack = 0  # ...and how far beyond it that may grow before it is given back

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
        rss, available = rss_bytes(), available_bytes()
        self._budget = self.bounds.bytes_for(rss, available, self._local_ranks)
        self._machine_budget = self.bounds.machine_bytes(rss, available, self._local_ranks)
        self.started_at = time.monotonic()
        prof.start()
        # Growth counts from here: start()'s buffers (up to ~70 MiB on torch 2.13, CPU) are a
        # fixed cost, not events.
        self._private0 = private_rss_bytes()
        self._heap0 = heap_in_use_bytes()
        self._slack0 = self._private0 - (self._heap0 or 0)
        self._max_slack = max(64 * _MiB, rss // 8)
        self._mark_boundary()
        self.prof = prof  # only once started: stop() is then always safe

    def step(self) -> None:
        """A step ended: the next ProfilerStep# begins."""
        self.prof.step()
        self._mark_boundary()

    def _mark_boundary(self) -> None:
        """Read memory between two steps, when the step's tensors are freed: the growth of the
        heap in use since the start is the events (and whatever the script keeps), not the freed
        memory malloc holds on to (0.12 ms a reading on torch 2.13's heap)."""
        self._boundary_at = time.monotonic()
        private = private_rss_bytes()
        heap = heap_in_use_bytes() if self._heap0 is not None else None
        grown = private - self._private0 if heap is None else heap - (self._heap0 or 0)
        # lists replaced whole: read from any thread
        self._in_use_at = [*self._in_use_at, private if heap is None else heap]
        self._growth = [*self._growth, max(0, grown)]
        # Freed activations pinned by the events: the events, small and long-lived, land in the
        # holes a step's freed tensors leave, the next step's tensors no longer fit there, and
        # resident memory grows by a step's worth of holes at every step. On torch 2.13, CPU, a
        # profiler over examples/gpt_train.py's model grew 70 MB a step while the heap in use
        # grew 1.2 MB; malloc_trim at each boundary held each step's peak at 986-1,044 MB (991
        # before profiling), and the doctor's peak went from 1.45x to 1.20-1.25x the script's
        # (docs/doctor.md). The step after re-faults the pages it reuses (6% more CPU a step
        # when trimmed at every boundary): only past `_max_slack`.
        if heap is not None and private - heap - self._slack0 > self._max_slack:
            release_freed_memory()

    def event_bytes(self) -> int:
        """The memory the recorded events hold now (an upper estimate): the growth at the last
        step boundary beyond what the script keeps per step, plus, for the step under way, its
        rise in memory in use beyond the script's own in-step rise (StepFootprint)."""
        growth, at = self._growth, self._in_use_at
        if not growth:
            return 0
        now = heap_in_use_bytes() if self._heap0 is not None else None
        rise = (private_rss_bytes() if now is None else now) - at[len(growth) - 1]
        kept = max(0, growth[-1] - self._script_kept * (len(growth) - 1))
        return kept + max(0, rise - self._script_rise)

    def estimated_events(self) -> int:
        """An upper estimate of the events recorded so far, from the memory they hold."""
        return self.event_bytes() // RECORDING_BYTES_PER_EVENT

    def profiler_bytes(self, extra: int = 0) -> int:
        """The profiler's own memory once stopped: its events' and what stop() adds for them
        (with `extra` bytes of events more)."""
        detailed = self.recording.stacks or self.recording.shapes
        held = self.event_bytes() + extra
        return held + held // RECORDING_BYTES_PER_EVENT * STOPPED_BYTES_PER_EVENT[detailed]

    def over_bound(self) -> Bound | None:
        """Which bound the window has reached, if any (cheap; safe from any thread)."""
        if self.prof is None:
            return None
        if self._time_up():
            return "time"
        if self.profiler_bytes() >= self.budget():
            return "memory"
        if self.estimated_events() >= self.bounds.max_events:
            return "events"
        return None

    def _time_up(self) -> bool:
        """Past the time bound: once the steps asked for are in, or within them, when the step
        under way has run that long alone (one that may never end). minGPT's chargpt.py beside
        two busy loops took 7.5 s a step: cut at 60 s, it kept 8 of 10."""
        now = time.monotonic()
        if now - self.started_at < self.bounds.max_seconds:
            return False
        return len(self._growth) > self._hold or now - self._boundary_at >= self.bounds.max_seconds

    def next_step_over_bound(self) -> Bound | None:
        """At a step boundary: which bound one more step like the median so far would reach
        (the window then ends here, with whole steps, rather than inside the next one)."""
        growth = self._growth
        if self.prof is None or len(growth) < 2:
            return None
        # The median step's growth: one step that allocated something once (a lazy buffer, a
        # cache) is not what every later step records.
        steps = sorted(b - a for a, b in itertools.pairwise(growth))
        step = max(0, steps[len(steps) // 2] - self._script_kept)
        if self.profiler_bytes(step) >= self.budget():
            return "memory"
        if (self.event_bytes() + step) // RECORDING_BYTES_PER_EVENT >= self.bounds.max_events:
            return "events"
        return None

    def budget(self) -> int:
        """The memory bound of the step under way (at a boundary: about to start): the
        machine's while it is one of the steps the window was asked for, the process's after.
        (Counting the step about to start as done, the 10th step of 10 was judged at the
        process's budget: accelerate's gradient_accumulation.py stopped at 9.)"""
        return self._machine_budget if len(self._growth) <= self._hold else self._budget

    def describe_bound(self, bound: Bound) -> str:
        """Why the window was cut, in words."""
        if bound == "time" and len(self._growth) <= self._hold:
            return f"a profiled step ran past the window's {self.bounds.max_seconds:g} s bound"
        if bound == "time":
            return f"the profiled window reached its {self.bounds.max_seconds:g} s bound"
        held = self.event_bytes() / _MiB
        method = (
            "the heap in use at step boundaries (glibc mallinfo2)"
            if self._heap0 is not None
            else "the growth of private memory at step boundaries"
        )
        if bound == "memory":
            return (
                f"the profiler's events held about {held:,.0f} MiB ({method}, beyond the "
                f"script's own in-step rise): with what stopping the profiler adds for up to "
                f"{self.estimated_events():,} events, it would pass its bound of "
                f"{self.budget() / _MiB:,.0f} MiB ({self._budget_words()})"
            )
        return (
            f"the profiler's events held about {held:,.0f} MiB ({method}): up to "
            f"{self.estimated_events():,} events, over the bound of {self.bounds.max_events:,}"
        )

    def _budget_words(self) -> str:
        if self.budget() == self._budget:
            return (
                "half the memory the process held when profiling started plus 256 MiB, at most "
                "half the memory the machine had available, shared by its ranks"
            )
        return (
            f"within its {self._hold} steps: half the memory the machine had available, shared "
            "by its ranks"
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
