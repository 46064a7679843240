"""--max-seconds: when the script's time is up, said once, and agreed by the ranks of a job.

The watchdog (runner/watchdog.py) holds the time and escalates once it passes; the session stops
the script at the next step boundary or service call. One rank of several first asks every rank
to stop together at a step boundary soon (runner/ranks.py): stopped at once, it could leave the
others waiting in a collective.
"""

from __future__ import annotations

import time

from torchpace.runner.options import SessionState
from torchpace.runner.ranks import RankAgreement
from torchpace.runner.watchdog import Watchdog

# After --max-seconds, how long the ranks of a job get to reach the step they agreed to stop at.
GRACE_S = 30.0


class Deadline:
    """The --max-seconds of one session (none when `max_seconds` is None)."""

    def __init__(
        self,
        max_seconds: float | None,
        watchdog: Watchdog,
        ranks: RankAgreement,
        state: SessionState,
    ) -> None:
        self.max_seconds = max_seconds
        self._watchdog = watchdog
        self._ranks = ranks
        self._state = state

    def start(self, started: float) -> None:
        """The script's time starts at `started` (time.monotonic())."""
        if self.max_seconds is not None:
            self._watchdog.deadline = started + self.max_seconds

    def passed(self) -> bool:
        """Whether the time is up (the ranks' grace included, once they were asked)."""
        at = self._watchdog.deadline
        return at is not None and time.monotonic() >= at

    def note(self) -> None:
        """Say once that the time ran out (from any thread: a script that swallows the doctor's
        signal is stopped by the watchdog alone, and must not read as stopped after its window)."""
        if not self._state.timed_out:
            self._state.timed_out = True
            self._state.notes.append(f"stopped after --max-seconds {self.max_seconds:g}")

    def agreed(self) -> bool:
        """Whether the ranks were asked now to stop together, and given GRACE_S to get there
        before stopping anywhere (False for a single process, or when asked before)."""
        if not self._ranks.ask_deadline():
            return False
        self.note()
        self._watchdog.deadline = time.monotonic() + GRACE_S
        return True
