"""The account's ledger: one timeline, each stretch of it added to one phase's running total.

Who owns a moment is decided by PRIORITY (runner/sensors/whole_run.py): the first activity under
way, else the base (start-up before the first step, training steps after it, tear-down for
what follows the last step). No clock and no torch: the caller gives every time.
"""

from __future__ import annotations

import threading

from torchpace.runner.sensors.whole_run import PHASES, PRIORITY


class Ledger:
    """Running totals per phase of one timeline; each stretch counted once, by PRIORITY."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.counts = dict.fromkeys(PHASES, 0)
        self.open = dict.fromkeys(PRIORITY, 0)
        self.base = "start-up"
        self.since = start
        self.pending = 0.0  # training time since the last boundary: tear-down if none follows
        self.lock = threading.RLock()  # a GC pause may begin inside the ledger's own code

    def top(self) -> str:
        """Who owns this moment."""
        return next((c for c in PRIORITY if self.open[c]), self.base)

    def _flush(self, now: float) -> None:
        dt = now - self.since
        if dt <= 0:
            return
        owner = self.top()
        self.totals[owner] += dt
        if owner == "training":
            self.pending += dt
        self.since = now

    def enter(self, phase: str, now: float, *, counted: bool = True) -> None:
        """An activity begins (at `now`, which may be a moment ago: iter(loader)'s start)."""
        with self.lock:
            self._flush(now)
            self.open[phase] += 1
            self.counts[phase] += counted

    def leave(self, phase: str, now: float) -> None:
        with self.lock:
            self._flush(now)
            self.open[phase] = max(0, self.open[phase] - 1)

    def first_signal(self, now: float) -> None:
        """The first step began: start-up is over."""
        with self.lock:
            if self.base == "start-up":
                self._flush(now)
                self.base = "training"

    def boundary(self, now: float) -> float:
        """A step ended: its training time (less the activities inside it)."""
        with self.lock:
            self._flush(now)
            step, self.pending = self.pending, 0.0
            self.counts["training"] += 1
            return step

    def credit(self, phase: str, under: str, seconds: float) -> None:
        """Move `seconds` from `under` to `phase` (a GC pause, judged after it ended)."""
        with self.lock:
            self.totals[under] -= seconds
            self.totals[phase] += seconds
            self.counts[phase] += 1
            if under == "training":
                self.pending -= seconds

    def close(self, now: float) -> dict[str, float]:
        """The script ended: totals, training since the last step moved to tear-down."""
        with self.lock:
            self._flush(now)
            moved, self.pending = self.pending, 0.0
            self.totals["training"] -= moved
            self.totals["tear-down"] += moved
            return dict(self.totals)
