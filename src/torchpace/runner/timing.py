"""Step times the runner keeps to measure the profiler's own cost: the same script's steps with
and without the profiler, wall time between step boundaries.

Unprofiled steps are taken on both sides of the profiled window (warm-up steps that ran neither
watched nor profiled, the first one left out; then `timed_steps` after the window), so a machine
whose load drifts during the run moves both sides of the comparison alike; doctor/conditions.py
decides whether the figures agree well enough to state a cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class StepClock:
    """Durations of the steps that ended at each boundary, by the phase they ran in (ms)."""

    before_ms: list[float] = field(default_factory=list)  # unwatched warm-up steps, not the first
    profiled_ms: list[float] = field(default_factory=list)
    after_ms: list[float] = field(default_factory=list)  # timed after the profiled window
    fewer_ms: list[float] = field(default_factory=list)  # then at fewer torch threads (a busy CPU)
    _last: float | None = None  # time.perf_counter() at the last boundary or mark

    def boundary(self, phase: str, index: int) -> None:
        """Step `index` (1-based, since steps were settled) ended; it ran in `phase`."""
        now = time.perf_counter()
        if self._last is not None:
            took = (now - self._last) * 1000.0
            if phase == "warmup" and index >= 2:  # the first step pays one-off costs
                self.before_ms.append(took)
            elif phase == "profile":
                self.profiled_ms.append(took)
            elif phase == "timed":
                self.after_ms.append(took)
            elif phase == "probe":
                self.fewer_ms.append(took)
        self._last = now

    def mark(self) -> None:
        """A step starts now (the profiler has started, or its trace is written)."""
        self._last = time.perf_counter()

    def restart(self) -> None:
        """Steps are counted anew with another signal: earlier durations measured other steps."""
        self.before_ms.clear()
        self.profiled_ms.clear()  # a window being recorded is discarded too
        self._last = None

    @property
    def unprofiled_ms(self) -> list[float]:
        """Every unprofiled step timed, before the window then after it."""
        return [*self.before_ms, *self.after_ms]
