"""The script's threads as the doctor sees them: which reached a hook, which still run, and
keeping the doctor's stop out of their tracebacks."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any


class ScriptThreads:
    """Threads of the script that reached one of the doctor's hooks."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self._old_hook: Any = None
        self._quiet: type[BaseException] | None = None

    def running(self) -> list[threading.Thread]:
        """Those still running, other than the caller's. Listed, not asked: a stop raised while
        the script's main thread is in Thread.join() marks the joined thread finished although
        it runs on (CPython 3.11, bpo-45274); interpreter shutdown then aborts inside it."""
        me = threading.current_thread()
        return [t for t in threading.enumerate() if t.ident in self.seen and t is not me]

    def wait(self, timeout: float, *, longer: Callable[[], bool]) -> list[str]:
        """Wait up to `timeout` s (120 s while `longer()`) for them to end; names still running."""
        start = time.monotonic()
        running = self.running()
        while running and time.monotonic() - start < (120.0 if longer() else timeout):
            time.sleep(0.02)
            running = self.running()
        return [t.name for t in running]

    def quiet(self, stop: type[BaseException]) -> None:
        """A thread ended by `stop` (the doctor stopping the script) prints no traceback."""
        self._quiet, self._old_hook = stop, threading.excepthook
        threading.excepthook = self._hook

    def unquiet(self) -> None:
        """Put the previous hook back, unless a thread the doctor stops still runs."""
        if self._old_hook is not None and not self.running():
            threading.excepthook = self._old_hook
            self._old_hook = None

    def _hook(self, args: Any) -> None:
        if self._quiet is not None and isinstance(args.exc_value, self._quiet):
            return  # a training thread the doctor stopped: not an error
        self._old_hook(args)


def importing(frame: Any) -> bool:
    """Whether a thread is inside an import (the watchdog's action then waits a tick: an
    exception raised inside an import would leave a half-made module)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def main_importing() -> bool:
    """Whether the main thread is inside an import now (read from another thread)."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    return frame is not None and importing(frame)
