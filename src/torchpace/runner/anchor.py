"""Which thread's steps count: every thread counts its own, one of them delimits the doctor's steps.

The first thread to give a step signal counts; a later one with a stronger signal (a prefetch
thread's batches, then the main thread's optimizer steps) takes over, and steps are counted again
(runner/steps.py `outranks`). The profiler must start and stop on one thread (torch's profiler
aborts the process otherwise), so a takeover while profiling waits for the recording thread to
hand over at its next hook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from torchpace.runner.options import Phase
from torchpace.runner.steps import Event, Signal, StepDetector, outranks


class Anchor:
    """Per-thread step counts, the thread whose steps count, and a pending hand-over."""

    def __init__(self, settle: int, ticks: Callable[[], int] | None = None) -> None:
        self._settle = settle
        self._ticks = ticks  # the steps counted so far (StepDetector.ticks)
        self._detectors: dict[int | None, StepDetector] = {}  # thread id -> its own step count
        self.thread: int | None = None  # the thread whose events delimit steps
        self.handover: int | None = None  # a thread with a stronger signal, waiting to count

    @property
    def detector(self) -> StepDetector:
        """The step count that counts: the anchor thread's (the main thread's before any)."""
        key = self.thread if self.thread is not None else threading.main_thread().ident
        return self.detector_of(key)

    def detector_of(self, thread: int | None) -> StepDetector:
        det = self._detectors.get(thread)
        if det is None:
            det = self._detectors.setdefault(
                thread, StepDetector(settle=self._settle, ticks=self._ticks)
            )
        return det

    def here(self) -> bool:
        """Whether this thread records (or no thread does yet)."""
        return self.thread in (None, threading.get_ident())

    def may_take_over(self, me: int, counted: Signal | None) -> bool:
        """Whether thread `me` counts steps from now on, by its signal (no lock needed)."""
        return self.thread is None or outranks(self.detector_of(me).mode, counted)

    def adopt(self, me: int, event: Event, counted: Signal | None, phase: Phase) -> Event:
        """Thread `me`, with a stronger signal, counts from now on (lock held): its event, or
        RESTART when steps were counted before; NONE while it waits for the hand-over, or once
        the window is over (the first thread to signal still counts steps: ranks agree)."""
        if phase == "profile" and self.thread is not None:
            self.handover = me  # the profiler stops in the thread that started it
            return Event.NONE
        if phase in ("aside", "timed", "probe", "done") and self.thread is not None:
            return Event.NONE
        self.thread = me
        return Event.RESTART if counted is not None else event

    def take_handover(self, phase: Phase) -> bool:
        """In the recording thread: the waiting thread counts from now on, unless the window is
        over; whether steps count again from the warm-up (the recording is dropped)."""
        again = phase in ("profile", "warmup", "watch")
        if again:
            self.thread = self.handover
        self.handover = None
        return again
