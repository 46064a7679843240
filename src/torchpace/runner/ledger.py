"""The account's ledger: one timeline, each stretch of it added to one phase's running total.

Who owns a moment is decided by PRIORITY (runner/sensors/whole_run.py): the first activity under
way, else the base (start-up before the first step, training steps after it, tear-down for
what follows the last step). No clock and no torch: the caller gives every time.
"""

from __future__ import annotations

import threading

from torchpace.runner.sensors.whole_run import PHASES, PRIORITY, Timeline

BINS = 240  # the timeline's bins: their width doubles as the run grows (memory stays flat)
FIRST_BIN_S = 0.05
_INDEX = {p: i for i, p in enumerate(PHASES)}


class Ledger:
    """Running totals per phase of one timeline; each stretch counted once, by PRIORITY."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.counts = dict.fromkeys(PHASES, 0)
        self.open = dict.fromkeys(PRIORITY, 0)
        self.active = 0  # activities under way (most stretches have none: the base owns them)
        self.base = "start-up"
        self.since = start  # the ledger's totals and timeline hold the time up to here
        # Where this step's training time not yet in the totals begins: the later of `since`
        # and the last step boundary (a typical step leaves `since` behind: `boundary`).
        self.mark = start
        self.steps = 0  # boundaries (counts["training"] once closed)
        self.pending = 0.0  # training time since the last boundary: tear-down if none follows
        self.lock = threading.RLock()  # a GC pause may begin inside the ledger's own code
        self.in_step: dict[str, float] = {}  # activities' seconds since the last boundary
        self.bin_s = FIRST_BIN_S
        self.bins = [[0.0] * len(PHASES) for _ in range(BINS)]
        self._bin_row = self.bins[0]  # the last bin used, and its edges (_bin_used)
        self._bin_lo, self._bin_hi = start, start + FIRST_BIN_S

    def top(self) -> str:
        """Who owns this moment."""
        if self.active:
            for c in PRIORITY:
                if self.open[c]:
                    return c
        return self.base

    def _flush(self, now: float) -> None:
        t0 = self.since
        dt = now - t0
        if dt <= 0:
            return
        owner = self.top() if self.active else self.base
        self.totals[owner] += dt
        if owner == "training":
            self.pending += now - self.mark  # earlier steps were told theirs
        elif owner in self.open:
            self.in_step[owner] = self.in_step.get(owner, 0.0) + dt
        self.since = self.mark = now
        if self._bin_lo <= t0 and now < self._bin_hi:  # within the last bin used: most steps
            self._bin_row[_INDEX[owner]] += dt
        else:
            self._bin(owner, t0, now)
            self._bin_used(now)

    def _bin(self, owner: str, t0: float, t1: float) -> None:
        """Spread one stretch over the timeline's bins (halving their number when full)."""
        i = int((t0 - self.start) / self.bin_s)
        if 0 <= i < BINS and t1 < self.start + (i + 1) * self.bin_s:
            self.bins[i][_INDEX[owner]] += t1 - t0  # within one bin
            return
        while t1 - self.start >= BINS * self.bin_s:
            self.bins = [
                [a + b for a, b in zip(self.bins[i], self.bins[i + 1], strict=True)]
                for i in range(0, BINS, 2)
            ] + [[0.0] * len(PHASES) for _ in range(BINS // 2)]
            self.bin_s *= 2
        k, width = _INDEX[owner], self.bin_s
        i = max(0, int((t0 - self.start) / width))
        while t0 < t1:  # i moves on each time round: a rounded edge cannot stall it
            edge = min(t1, self.start + (i + 1) * width)
            if edge > t0:
                self.bins[min(i, BINS - 1)][k] += edge - t0
                t0 = edge
            i += 1

    def _bin_used(self, t: float) -> None:
        """Remember the bin that holds moment `t` (its row and edges): the next stretch, most
        often inside it, is added without the arithmetic (every step passes here)."""
        i = int((t - self.start) / self.bin_s)
        if 0 <= i < BINS:
            self._bin_row = self.bins[i]
            self._bin_lo = self.start + i * self.bin_s
            self._bin_hi = self.start + (i + 1) * self.bin_s
        else:
            self._bin_lo, self._bin_hi = 0.0, -1.0

    def enter(self, phase: str, now: float, *, counted: bool = True) -> None:
        """An activity begins (at `now`, which may be a moment ago: iter(loader)'s start)."""
        with self.lock:
            self._flush(now)
            self.open[phase] += 1
            self.active += 1
            self.counts[phase] += counted

    def leave(self, phase: str, now: float) -> None:
        with self.lock:
            self._flush(now)
            if self.open[phase]:
                self.open[phase] -= 1
                self.active -= 1

    def undo(self, phase: str, since: float, now: float, *, counted: bool = True) -> None:
        """An activity entered at `since` turned out to be none (an eval-mode forward that a
        backward followed): its time goes back to the base, and it is not counted."""
        with self.lock:
            self.leave(phase, now)
            self.counts[phase] -= counted
            seconds = min(now - since, self.in_step.get(phase, 0.0))  # inside this step only
            if seconds <= 0:
                return
            self.totals[phase] -= seconds
            self.totals[self.base] += seconds
            left = self.in_step[phase] - seconds
            if left > 0:
                self.in_step[phase] = left
            else:
                del self.in_step[phase]
            if self.base == "training":
                self.pending += seconds
            self._move_binned(self.base, phase, seconds)

    def first_signal(self, now: float) -> None:
        """The first step began: start-up is over."""
        with self.lock:
            if self.base == "start-up":
                self._flush(now)
                self.base = "training"

    def boundary(self, now: float) -> tuple[float, dict[str, float]]:
        """A step ended: its training time (less the activities inside it), and those
        activities' seconds by phase."""
        with self.lock:
            inside = self.in_step
            if inside or self.active or self.base != "training":
                self._flush(now)
                if inside:
                    self.in_step = {}
            # A typical step (training only since the last boundary) is not added to the totals
            # and the timeline here: the next flush adds the steps since `since` at once (the
            # account's cost per step: docs/doctor.md).
            step = self.pending + now - self.mark
            self.pending, self.mark = 0.0, now
            self.steps += 1
            return step, inside

    def credit(
        self, phase: str, under: str, seconds: float, *, ended: bool = False, counted: bool = True
    ) -> None:
        """Move `seconds` from `under` to `phase`: inside the step under way (a GC pause, judged
        after it ended), or (`ended`) in a step that has ended (a slow step's unexplained excess;
        an epoch start's first step, its start counted before)."""
        with self.lock:
            if self.since < self.mark:  # the timeline holds the steps up to the last boundary
                self._flush(self.mark)
            self.totals[under] -= seconds
            self.totals[phase] += seconds
            self.counts[phase] += counted
            if not ended:  # inside the step under way (a GC pause)
                if under == "training":
                    self.pending -= seconds
                self.in_step[phase] = self.in_step.get(phase, 0.0) + seconds
            # else: the next step's time starts at zero
            self._move_binned(phase, under, seconds)

    def _move_binned(self, phase: str, under: str, seconds: float) -> None:
        """Move a credit in the timeline too: from the latest bins backwards."""
        k, j = _INDEX[phase], _INDEX[under]
        i = min(BINS - 1, int((self.since - self.start) / self.bin_s))
        while seconds > 0 and i >= 0:
            moved = min(seconds, self.bins[i][j])
            self.bins[i][j] -= moved
            self.bins[i][k] += moved
            seconds -= moved
            i -= 1

    def close(self, now: float) -> dict[str, float]:
        """The script ended: totals, training since the last step moved to tear-down."""
        with self.lock:
            self._flush(now)
            self.counts["training"] = self.steps
            moved, self.pending = self.pending, 0.0
            self.totals["training"] -= moved
            self.totals["tear-down"] += moved
            self._move_binned("tear-down", "training", moved)
            return dict(self.totals)

    def timeline(self) -> Timeline:
        """The bins that hold any time, as plain data."""
        used = max((i + 1 for i, b in enumerate(self.bins) if any(b)), default=0)
        return Timeline(self.bin_s, tuple(tuple(b) for b in self.bins[:used]))
