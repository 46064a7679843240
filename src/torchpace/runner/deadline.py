"""--max-seconds: when the script's time is up, said once, and agreed by the ranks of a job.

The watchdog (runner/watchdog.py) holds the time and escalates once it passes; the session stops
the script at the next step boundary or service call. One rank of several first asks every rank
to stop together at a step boundary soon (runner/ranks.py): stopped at once, it could leave the
others waiting in a collective.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from torchpace.runner.options import SessionState
from torchpace.runner.ranks import RankAgreement
from torchpace.runner.watchdog import Watchdog

# After --max-seconds, how long the ranks of a job get to reach the step they agreed to stop at.
GRACE_S = 30.0


@dataclass
class Deadline:
    """The --max-seconds of one session (none when `max_seconds` is None)."""

    max_seconds: float | None
    watchdog: Watchdog  # holds the time, and escalates once it passes
    ranks: RankAgreement
    state: SessionState

    def start(self, started: float) -> None:
        """The script's time starts at `started` (time.monotonic())."""
        if self.max_seconds is not None:
            self.watchdog.deadline = started + self.max_seconds

    def passed(self) -> bool:
        """Whether the time is up (the ranks' grace included, once they were asked)."""
        at = self.watchdog.deadline
        return at is not None and time.monotonic() >= at

    def note(self) -> None:
        """Say once that the time ran out (from any thread: a script that swallows the doctor's
        signal is stopped by the watchdog alone, and must not read as stopped after its window)."""
        if not self.state.timed_out:
            self.state.timed_out = True
            self.state.notes.append(f"stopped after --max-seconds {self.max_seconds:g}")

    def agreed(self) -> bool:
        """Whether the ranks were asked now to stop together, and given GRACE_S to get there
        before stopping anywhere (False for a single process, or when asked before)."""
        if not self.ranks.ask_deadline():
            return False
        self.note()
        self.watchdog.deadline = time.monotonic() + GRACE_S
        return True
