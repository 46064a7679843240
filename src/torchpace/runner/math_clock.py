"""The matmul/convolution time of a few steps at fewer torch threads, on a busy machine's CPU run.

Beside other processes, each op of a run whose torch threads outnumber the free cores waits for
its slowest thread, some ops far more than others, so the profiled window's matmul share says
nothing of a quiet run's (no-mixed-precision's doc page). At the free cores' count no op waits at
a barrier: after the steps timed there (runner/window.py), a profiler recording as the window did
(host ops, and memory events unless --no-memory: the profiler's cost is in both steps alike)
times the math of a few more (runner/phases.py's MATH_STEPS), and policy/threads.py bounds the
quiet share from it.
"""

from __future__ import annotations

import threading
from typing import Any

from torchpace.cores import thread_waits
from torchpace.trace.names import CPU_MATH_OPS
from torchpace.trace.nesting import outermost


class MathClock:
    """A CPU-only torch.profiler over the steps it is open for, recording as a CPU run's window
    does (runner/profiling.py's recording_for: no shapes or stacks)."""

    def __init__(self, *, memory: bool) -> None:
        import torch

        self._profiler: Any = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=memory
        )
        self._thread = 0  # the thread that started it
        self._waits: tuple[float, int] | None = None  # its waits for a core when it started

    def start(self) -> None:
        """Record from now (the session knows it by `owns` by then: not the script's own)."""
        self._thread = threading.get_ident()
        self._waits = thread_waits()
        self._profiler.start()

    def owns(self, prof: Any) -> bool:
        return prof is self._profiler

    def stop(self) -> tuple[float, tuple[float, int] | None]:
        """Stop recording; the milliseconds the outermost matmul/convolution ops took, every
        thread's (a CPU backward runs on the thread that called it), and the thread's waits for
        a core meanwhile: their milliseconds and how many times it got one (None: unreadable)."""
        waits = thread_waits()
        self._profiler.stop()
        spans = outermost(self._math_ops(), lambda span: span)
        math_ms = sum(end - start for _, start, end in spans) / 1e3
        if waits is None or self._waits is None:
            return math_ms, None
        return math_ms, ((waits[0] - self._waits[0]) * 1e3, waits[1] - self._waits[1])

    def _math_ops(self) -> list[tuple[int, float, float]]:
        """Each matmul/convolution op's thread, start and end (us). From kineto's own events:
        `events()` builds a Python object and a tree of all of them (928 ms for a small
        Transformer's 2 steps, 7,708 events, on a busy machine; 32 ms so)."""
        try:
            events = self._profiler.profiler.kineto_results.events()
            return [
                (e.start_thread_id(), e.start_ns() / 1e3, (e.start_ns() + e.duration_ns()) / 1e3)
                for e in events
                if e.name() in CPU_MATH_OPS
            ]
        except AttributeError:  # another torch's names
            return [
                (e.thread, e.time_range.start, e.time_range.end)
                for e in self._profiler.events()
                if e.name in CPU_MATH_OPS
            ]

    def abandon(self) -> None:
        """The script ended, or starts its own profiler: stop recording, keep nothing. Only on
        the thread that started it (torch aborts the process when another thread stops it):
        elsewhere it is left to the end of the process."""
        if threading.get_ident() == self._thread:
            self._profiler.stop()
