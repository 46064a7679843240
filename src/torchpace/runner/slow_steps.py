"""Slow steps under `doctor --follow`: judged against the running median, their cause evidence.

A step whose wall time passes SLOW_STEP x the running median (or its last steps' median, when
higher: runner/follow.py) is slow. When the activities the hooks
saw inside it (an evaluation pass, a torch.save, an epoch's loader start, a GC pause) took most of
its excess, they are its cause. When the training work itself was slow, nothing the hooks see
explains it: the next such step is captured, a few steps under torch.profiler, and the capture's
trace says where the extra time went (a recompile, a collective waiting for another rank, the
loader, a host-device sync, a slower forward). The next one is predicted from the gaps between the
last ones (the first one's distance from the run's start): slow steps recur with the loop's periods
(an epoch, a logging or evaluation interval), so the gap that recurs most among the last few is
taken. Bounded: MAX_CAPTURES captures of CAPTURE_STEPS steps each, at most MAX_KEPT slow steps
kept (the slowest), the others counted.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from torchpace.runner.sensors.whole_run import SlowStep

SLOW_STEP = 3.0  # a step this many times the running median is slow...
MIN_EXCESS_S = 0.01  # ...and this much longer: a capture costs more than a 1 ms hiccup
MAX_KEPT = 16
MAX_CAPTURES = 3
CAPTURE_STEPS = 3  # the step before the predicted one, it, and the one after
KEEP_GAPS = 5  # unexplained slow steps the prediction reads
ACTIVITY = {
    "evaluation": "an evaluation pass",
    "checkpoint": "a checkpoint save (torch.save)",
    # Without workers, that is the first batch's own loading (PyG's compile/gin.py: 14 ms).
    "epoch-start": "an epoch's start (iter(loader) to its first batch, its workers' start included)",
    "gc": "a garbage-collector pause",
    "compile": "torch.compile compiling (a recompile, or a frame seen for the first time)",
    "torchpace": "torchpace's own work (its profiler, its trace)",
}
UNEXPLAINED = "the training work itself (no activity the hooks see)"
# The first step of an epoch whose loader's workers started again beside it: its whole excess is
# the epoch's start, not only the wait for its batch (kept workers' prefetch there cost 15-40 ms
# of a ~100 ms step: no slow step of its own, so not a cause taken on trust).
# ignite's CIFAR-10 example (2 workers, 2 cores): an epoch's first step took 560-830 ms against
# 115-185 ms steps, 60-130 ms of it the wait; every phase of the captured one ran slower (its
# forward 3x, backward 2x, optimizer 10x).
RESTARTED = (
    "an epoch's start: its loader's workers started again beside this step "
    "(persistent_workers=False)"
)


class SlowSteps:
    """Judge each step, keep the slowest, and capture the next unexplained one."""

    def __init__(
        self,
        out_dir: Path | None,
        own: Callable[[], AbstractContextManager[None]],
        rank: int | None = None,
    ) -> None:
        self.out_dir = out_dir
        self.rank = rank  # one of several ranks: in the capture's name (they share the folder)
        self.own = own  # the doctor's own time in the account
        self.seen = 0
        self._kept: list[tuple[float, int, SlowStep]] = []  # a min-heap by ms
        self._unexplained: list[int] = []  # the last KEEP_GAPS unexplained slow steps
        self.next_step: int | None = None  # the predicted next one
        self.capture: Any = None  # the running ProfilerWindow (read at every boundary)
        self._starting = False
        self._capture_thread = 0
        self._first = 0  # the capture's first step
        self.captures: list[tuple[int, int, str]] = []  # (first step, last step, trace path)
        self.tries = 0

    def threshold(self, median_s: float) -> float:
        """The wall time past which a step is slow, for a running median (s)."""
        return max(SLOW_STEP * median_s, median_s + MIN_EXCESS_S)

    def judge(
        self,
        step: int,
        at_s: float,
        wall_s: float,
        inside: dict[str, float],
        median_s: float,
        restarted: str = "",
    ) -> bool:
        """One step ended; whether it was slow with no activity to explain it. `restarted`: the
        cause, when the step began an epoch whose loader's workers started (RESTARTED)."""
        if wall_s <= SLOW_STEP * median_s or wall_s - median_s < MIN_EXCESS_S:
            return False
        self.seen += 1
        excess = wall_s - median_s
        top = max(inside, key=inside.__getitem__) if inside else ""
        explained = sum(inside.values()) >= 0.5 * excess
        if explained:
            cause = ACTIVITY.get(top, top)
        else:
            explained, cause = bool(restarted), restarted or UNEXPLAINED
        evidence = ", ".join(f"{p} {s * 1000.0:.0f} ms" for p, s in inside.items() if s > 0)
        self._keep(
            SlowStep(
                step=step,
                at_s=at_s,
                ms=wall_s * 1000.0,
                median_ms=median_s * 1000.0,
                cause=cause,
                evidence=f"inside the step: {evidence}" if evidence else "",
            )
        )
        if not explained and not self.capturing:
            self._predict(step)
        return not explained

    def _keep(self, slow: SlowStep) -> None:
        item = (slow.ms, slow.step, slow)
        if len(self._kept) < MAX_KEPT:
            heapq.heappush(self._kept, item)
        elif item > self._kept[0]:
            heapq.heapreplace(self._kept, item)

    def _predict(self, step: int) -> None:
        """The next unexplained slow step: this one plus the gap that recurs most among the last
        few (a noisy step between two periodic ones leaves the period standing), the smallest
        on a tie; with one seen, its distance from the run's start."""
        seen = self._unexplained = [*self._unexplained[-(KEEP_GAPS - 1) :], step]
        gaps = [b - a for i, a in enumerate(seen) for b in seen[i + 1 :]]
        gap = min(gaps, key=lambda g: (-gaps.count(g), g)) if gaps else step
        if self.tries < MAX_CAPTURES and self.out_dir is not None:  # else no capture is due
            self.next_step = step + max(gap, CAPTURE_STEPS)

    def owns(self, prof: Any) -> bool:
        """Whether a profiler object is a capture's (not the script's own)."""
        own = self.capture.prof if self.capture is not None else None
        return self._starting or (own is not None and (prof is own or prof is own.profiler))

    @property
    def capturing(self) -> bool:
        """Whether a capture records now."""
        return self.capture is not None

    @property
    def busy(self) -> bool:
        """Whether a capture records now or may start at a coming step (the doctor's work)."""
        return self.capture is not None or self.next_step is not None

    def boundary(self, step: int, *, may_start: bool) -> None:
        """After step `step` ended (its judgement made): go on with a capture, or start one
        before the predicted slow step (`may_start`: no other profiler records)."""
        if self.capture is not None:
            self._step_capture(step)
            return
        if self.next_step is None or self.tries >= MAX_CAPTURES or self.out_dir is None:
            return
        if step + 2 < self.next_step:
            return
        if step + 2 > self.next_step or not may_start:
            self.next_step = None  # its start passed (the window was profiling): the next one
            return
        self._start(step + 1)

    def _start(self, first: int) -> None:
        import torch

        from torchpace.runner.profiling import ProfileBounds, ProfilerWindow, recording_for

        if torch.autograd._profiler_enabled():
            return  # the script's own profiler records
        self.tries += 1
        recording = recording_for(cuda=torch.cuda.is_available(), world_size=1, memory=False)
        window = ProfilerWindow(recording, ProfileBounds())
        self._starting = True  # the profiler's start must not look like the script's own
        try:
            with self.own():
                window.start()
        except Exception:  # another profiler, no memory: no capture
            return
        finally:
            self._starting = False
        self.capture, self._first = window, first
        self._capture_thread = threading.get_ident()

    def _step_capture(self, step: int) -> None:
        window = self.capture
        done = step - self._first + 1
        if done < CAPTURE_STEPS and window.over_bound() is None:
            with self.own():
                window.step()
            return
        self.next_step = None
        with self.own():
            self._write(window, step, done)
        self.capture = None

    def _write(self, window: Any, last: int, done: int) -> None:
        assert self.out_dir is not None
        ranked = "" if self.rank is None else f"-rank{self.rank}"
        path = self.out_dir / f"slow-step-{self._first}-{last}{ranked}.pt.trace.json.gz"
        try:
            window.stop()
            self.out_dir.mkdir(parents=True, exist_ok=True)
            written = window.export(path, done)
        except Exception:  # the folder is gone or full: no evidence, no guess
            window.discard()
            return
        self.captures.append((self._first, last, str(written)))

    def close(self) -> None:
        """The run ended: a capture still recording is dropped (stopped in its own thread)."""
        window, self.capture = self.capture, None
        if window is not None and self._capture_thread == threading.get_ident():
            window.discard()

    def kept(self) -> list[SlowStep]:
        """The slowest steps kept, in step order."""
        return sorted((s for _, _, s in self._kept), key=lambda s: s.step)
