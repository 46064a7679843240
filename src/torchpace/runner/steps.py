"""Automatic step detection: turn optimizer steps, DataLoader batches and backward calls into steps.

Plain Python with no torch import, so the policy is testable by feeding event sequences. The doctor's
hooks report events; `StepDetector` answers whether an event ends a step.

Signals, strongest first (a stronger one seen later replaces a weaker one and warm-up starts again):
  optimizer   the step of the optimizer that steps least often (two optimizers per iteration, as in
              a GAN, group into one step; `optimizer.step(closure)` is a whole iteration by itself)
  dataloader  batches taken from any DataLoader (evaluation loops, hand-written weight updates)
  backward    backward() calls (hand-written updates on tensors that come from no DataLoader)
  window      fixed time windows, when the script gives none of the above
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from torchpace.cores import main_thread_cpu_s

Signal = Literal["optimizer", "dataloader", "backward", "window"]
_RANK: dict[Signal, int] = {"window": 0, "backward": 1, "dataloader": 2, "optimizer": 3}


def outranks(signal: Signal | None, other: Signal | None) -> bool:
    """Whether `signal` is a stronger step signal than `other` (None: no signal yet)."""
    return signal is not None and (other is None or _RANK[signal] > _RANK[other])


class Event(enum.Enum):
    """What an event means for the step count."""

    NONE = 0  # not a step boundary
    BOUNDARY = 1  # a step ended here
    RESTART = 2  # a stronger signal appeared: steps are counted again from here


@dataclass
class StepDetector:
    """Decide which signal delimits steps and report each boundary.

    Args:
        settle: batches (or backward calls) seen with no optimizer step before the doctor settles on
            DataLoader (or backward) steps; optimizers need two steps of one optimizer (one cycle).
    """

    settle: int = 6
    mode: Signal | None = None
    anchor: int | None = None  # the optimizer whose step ends an iteration
    frozen: bool = False  # the anchor no longer changes (profiling has started)
    opt_counts: dict[int, int] = field(default_factory=dict)
    opt_seen: dict[int, int] = field(default_factory=dict)  # optimizer id -> its latest step number
    batches: int = 0
    backwards: int = 0
    closure: bool = False  # backward ran inside optimizer.step (a closure optimizer)
    # The steps counted so far, however they were counted (the session's fast path for a settled
    # run's anchor steps skips this detector); None: no optimizer takes over from a frozen anchor.
    ticks: Callable[[], int] | None = None
    took_over: int = 0  # optimizers that took over from a frozen anchor that stopped stepping
    owed: int = 0  # steps beyond one that the latest takeover's boundary ends (`steps_ended`)
    # Another optimizer -> (the tick of its latest step, its steps in that tick: since the
    # anchor's last step); and the steps of those that stepped before the anchor was frozen.
    _run: dict[int, tuple[int, int]] = field(default_factory=dict)
    _before: dict[int, int] = field(default_factory=dict)

    def _switch(self, mode: Signal) -> Event:
        previous = self.mode
        self.mode = mode
        return Event.RESTART if previous is not None else Event.BOUNDARY

    def _choose_anchor(self) -> int:
        # Fewest steps first (a WGAN steps its critic 5x per generator step); on a tie the optimizer
        # that stepped last closes the iteration (D then G: G).
        fewest = min(self.opt_counts.values())
        tied = [o for o in self.opt_counts if self.opt_counts[o] == fewest]
        return max(tied, key=lambda o: self.opt_seen[o])

    def optimizer_step(self, opt_id: int) -> Event:
        """An optimizer finished its step()."""
        self.opt_counts[opt_id] = self.opt_counts.get(opt_id, 0) + 1
        self.opt_seen[opt_id] = sum(self.opt_counts.values())
        if self.mode != "optimizer":
            if self.opt_counts[opt_id] < 2:
                return Event.NONE
            self.anchor = self._choose_anchor()
            event = self._switch("optimizer")
            return event if event is Event.RESTART or opt_id == self.anchor else Event.NONE
        if not self.frozen:
            self.anchor = self._choose_anchor()
        elif opt_id != self.anchor and self._takes_over(opt_id):
            self._before.pop(opt_id, None)  # the anchor it leaves takes back over at its 2nd
            self.anchor, self.took_over = opt_id, self.took_over + 1
        return Event.BOUNDARY if opt_id == self.anchor else Event.NONE

    def freeze(self) -> None:
        """The iteration's closing optimizer no longer changes (profiling starts), unless
        another takes over from it once it stops stepping (`_takes_over`)."""
        self.frozen = True
        self._before = {o: n for o, n in self.opt_counts.items() if o != self.anchor}

    def _takes_over(self, opt_id: int) -> bool:
        """Whether optimizer `opt_id` ends iterations from now on, the frozen anchor having
        stopped: it stepped twice since the anchor's last step, or, when it stepped p times
        before the anchor was frozen (a part of each iteration: a GAN's discriminator, a WGAN's
        critic), 2p + 1 times, more than any iteration holds. pytorch/examples' forward-forward
        trains its layers one after the other, each with its own Adam: the second layer's 60
        steps went uncounted and `--follow` called them tear-down. A probe's optimizer stepping
        in an evaluation takes over for its steps; the anchor takes back over at its second."""
        if self.ticks is None:
            return False
        tick = self.ticks()
        last, n = self._run.get(opt_id, (tick, 0))
        n = n + 1 if last == tick else 1
        self._run[opt_id] = (tick, n)
        before = self._before.get(opt_id, 0)
        if n < max(2, 2 * before + 1):  # before = 0: it never stepped before
            return False
        # Each of its steps was an iteration, the first of them inside the anchor's last one.
        self.owed = n - 1 if not before else 0
        return True

    def first_steps(self) -> int:
        """The steps the first boundary ends: its signal settles only once seen more than once
        (an optimizer's second step ends the first two iterations; the sixth batch, six)."""
        if self.mode == "optimizer" and self.anchor is not None:
            return self.opt_counts.get(self.anchor, 1)
        if self.mode == "dataloader":
            return self.batches
        return self.backwards if self.mode == "backward" else 1

    def steps_ended(self, first: bool) -> int:
        """The steps the boundary just reported ends: the `first` (`first_steps`), or one an
        optimizer took over at, which ends that optimizer's steps since the anchor's last (the
        forward-forward example's second layer: 199 of 200 steps counted)."""
        if first:
            return self.first_steps()
        owed, self.owed = self.owed, 0
        return 1 + owed

    def loader_batch(self) -> Event:
        """A DataLoader is about to produce a batch."""
        self.batches += 1
        return self._weak_signal("dataloader", self.batches)

    def backward_done(self, inside_optimizer: bool = False) -> Event:
        """A backward() call returned."""
        self.backwards += 1
        if inside_optimizer:
            self.closure = True
            return Event.NONE
        return self._weak_signal("backward", self.backwards)

    def _weak_signal(self, signal: Signal, count: int) -> Event:
        if self.mode == signal:
            return Event.BOUNDARY
        if self.opt_counts or (self.mode is not None and _RANK[self.mode] > _RANK[signal]):
            return Event.NONE
        if count < self.settle:
            return Event.NONE
        return self._switch(signal)

    def window_tick(self) -> Event:
        """A time window ended with no other signal (the caller decides when windows end)."""
        if self.mode is None:
            self.mode = "window"
            return Event.BOUNDARY
        return Event.BOUNDARY if self.mode == "window" else Event.NONE

    def describe(self) -> str:
        """How steps were found, in one sentence for the report."""
        if self.mode == "optimizer":
            n = len(self.opt_counts)
            if self.closure:
                return "steps are optimizer.step(closure) calls (each one is a whole iteration)"
            if self.took_over:
                return (
                    f"steps are optimizer.step() calls; {n} optimizers trained one after the "
                    "other (each took over as the one before it stopped)"
                )
            if n > 1:
                return f"steps are iterations of {n} optimizers (grouped by the one stepping least)"
            return "steps are optimizer.step() calls"
        if self.mode == "dataloader":
            return "steps are DataLoader batches (no optimizer stepped)"
        if self.mode == "backward":
            return "steps are backward() calls (no optimizer stepped, no DataLoader)"
        if self.mode == "window":
            return "steps are fixed time windows (no optimizer, DataLoader or backward seen)"
        return "no steps were found"


@dataclass
class TimeWindows:
    """When a fixed time window ends, for a script that has given no step signal at all (a slow
    step still gives signals: an optimizer's closure, a batch, a backward call). Seconds on the
    caller's clock.

    The quiet before the first window is counted in the main thread's CPU time as well: on a
    busy machine a slow first step stretches in wall time only. nanoGPT's first iteration (an
    evaluation, then a forward and backward) beside load 16 passed 10 s of wall time before its
    first backward, and the doctor profiled and reported three 0.5 s windows of that forward
    (forward 98%) before stopping the script, where a quiet machine gets optimizer steps."""

    after_s: float  # quiet this long before the first window
    every_s: float
    quiet_since: float = 0.0
    signals: int = 0  # optimizer steps, batches and backward calls seen
    next_end: float = 0.0
    cpu_clock: Callable[[], float | None] = main_thread_cpu_s
    _quiet_cpu: float | None = None  # the main thread's CPU time when the quiet began

    def due(self, now: float, mode: Signal | None, settling: Callable[[], bool]) -> bool:
        """Whether a window ends now. `settling`: the script imports, or has run no model yet
        (quiet time counts from then: an import-heavy start is not what windows are for)."""
        if mode is not None or self.signals:
            return mode == "window" and now >= self.next_end
        cpu = self.cpu_clock()  # read only while no signal came: once per watchdog tick
        settle = settling()
        if settle:
            self.quiet_since = now
        if settle or self._quiet_cpu is None:
            self._quiet_cpu = cpu
        return now - self.quiet_since >= self.after_s and self._cpu_quiet(cpu)

    def _cpu_quiet(self, cpu: float | None) -> bool:
        if cpu is None or self._quiet_cpu is None:
            return True  # unreadable: wall time alone
        return cpu - self._quiet_cpu >= self.after_s
