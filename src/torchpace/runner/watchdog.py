"""The runner's clock: a watchdog thread, signals to the script's main thread, and SIGTERM.

The script owns SIGALRM and the process's interval timer (scripts install their own alarms), so the
doctor keeps time in a thread of its own. When the session must act in the main thread (a time
window ends, a bound is reached, the deadline passes) the thread sends the main thread a real-time
signal that scripts do not use; its handler runs between two bytecodes of the script, as SIGALRM's
would. A deadline escalates: the signal (the session raises StopScript), then an exception raised
asynchronously in the main thread every tick (a script that swallows BaseException, or replaced
the handler), and finally `on_give_up`: the report is written from another thread and the process
ends, as `timeout -k` would end it.

The asynchronous exception never lands in the doctor's own work (stopping the profiler, writing the
trace): the session marks that work `busy()`, the watchdog raises only outside it, and the
escalation's clock restarts when the work ends. One landing inside torch's profiler stop() between
disabling the profiler and clearing its Python flag left every later profiler in the process
believing another one ran.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

# A real-time signal no common library claims (glibc keeps the ones below SIGRTMIN); where there
# are none (macOS), SIGALRM without an interval timer.
POKE_SIGNAL: int = (
    int(signal.SIGRTMIN) + 6 if hasattr(signal, "SIGRTMIN") else int(signal.SIGALRM)  # type: ignore[attr-defined]
)


@dataclass(frozen=True)
class Escalation:
    """How long after the deadline each harder step comes."""

    async_after_s: float = 2.0  # raise StopScript asynchronously in the main thread, every tick
    give_up_after_s: float = 8.0  # write the report from the watchdog and end the process
    # ...even while the doctor's own work runs (a trace export that never ends)
    give_up_busy_after_s: float = 120.0


# Work of the doctor's this long restarts the escalation's clock (writing a trace), shorter work
# (a step boundary's bookkeeping, every step) does not.
LONG_WORK_S = 0.5


class Watchdog:
    """A daemon thread that ticks, asks the session what is due, and pokes the main thread."""

    def __init__(
        self,
        *,
        due: Callable[[], bool],
        on_poke: Callable[[], None],
        tick_s: float = 0.05,
    ) -> None:
        self.due = due
        self.on_poke = on_poke
        self.tick_s = tick_s
        self.deadline: float | None = None  # time.monotonic()
        self.escalation = Escalation()
        self.on_give_up: Callable[[], None] | None = None
        self.stop_exception: type[BaseException] | None = None
        self.in_script = False  # async exceptions only while the script's code runs
        self._guard = threading.RLock()  # taken to raise, and to mark the doctor's work busy
        self._busy = 0  # depth of the doctor's own work in the main thread
        self._quiet_since = 0.0  # time.monotonic() when long work of the doctor's last ended
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._old_poke: Any = None
        self._gave_up = False

    # --- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Install the poke handler (main thread only) and start ticking."""
        if threading.current_thread() is threading.main_thread():
            self._old_poke = signal.signal(POKE_SIGNAL, self._handler)
        self._thread = threading.Thread(target=self._run, name="torchpace-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop ticking and put the poke signal's previous handler back."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None
        if self._old_poke is not None and threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(POKE_SIGNAL, self._old_poke)
            self._old_poke = None

    def _handler(self, signum: int, frame: Any) -> None:
        self.on_poke()

    # --- the thread -------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                self._tick()
            except Exception:  # the watchdog must outlive any surprise; the next tick retries
                continue

    # complex: the watchdog's escalation (poke, give up, raise in the script) under one lock.
    def _tick(self) -> None:
        now = time.monotonic()
        late = None if self.deadline is None else now - self.deadline
        if self.due() or (late is not None and late >= 0):
            self.poke()
        if late is None or late < self.escalation.async_after_s:
            return
        with self._guard:
            busy = self._busy > 0
            since = now - max(self.deadline or now, self._quiet_since)  # clock restarts after work
            stuck = late >= self.escalation.give_up_busy_after_s
            if (stuck or (not busy and since >= self.escalation.give_up_after_s)) and (
                not self._gave_up
            ):
                self._gave_up = True
                if self.on_give_up is not None:
                    self.on_give_up()
                return
            if busy or since < self.escalation.async_after_s or self._gave_up:
                return
            if self.in_script and self.stop_exception is not None and self._main is not None:
                raise_in_thread(self._main, self.stop_exception)

    def poke(self) -> None:
        """Make the main thread run the session's handler at its next bytecode."""
        if self._main is None or self._old_poke is None:
            return
        with contextlib.suppress(OSError, ValueError, ProcessLookupError):
            signal.pthread_kill(self._main, POKE_SIGNAL)

    def busy(self) -> contextlib.AbstractContextManager[None]:
        """A context for the doctor's own work in the main thread: no asynchronous stop in it."""
        return _IDLE if self.deadline is None else _Busy(self)

    def leave_script(self) -> None:
        """The script's code is over (main thread): no asynchronous stop from now on, and one
        already on its way is taken here, not in the runner's clean-up."""
        with self._guard:
            self.in_script = False
        _absorb(self.stop_exception)


_IDLE = contextlib.nullcontext()  # no deadline, no escalation: nothing to guard against


class _Busy:
    """Counts the doctor's work; absorbs a stop raised just before the count went up."""

    __slots__ = ("counted", "dog", "started")

    def __init__(self, dog: Watchdog) -> None:
        self.dog = dog
        self.counted = False
        self.started = 0.0

    def __enter__(self) -> None:
        dog = self.dog
        if dog.deadline is None:
            return  # no deadline, no escalation: nothing to guard against
        with dog._guard:
            dog._busy += 1
            self.counted = True  # no call between these two lines: no check for async exceptions
        self.started = time.monotonic()
        _absorb(dog.stop_exception)

    def __exit__(self, *exc: object) -> None:
        if self.counted:
            dog = self.dog
            with dog._guard:
                dog._busy -= 1
                now = time.monotonic()
                # Long work (a trace written) restarts the escalation's clock, so the script gets
                # its turn to stop at a boundary; a step's bookkeeping does not, or a script with
                # fast steps that swallows every stop would never be stopped.
                if now - self.started >= LONG_WORK_S:
                    dog._quiet_since = now


def _checkpoint() -> None:
    """Run a few bytecodes: CPython delivers a pending asynchronous exception at a call."""


def _absorb(exc: type[BaseException] | None) -> None:
    """Take an asynchronous stop that was raised before the guard was up (at most one: none is
    raised once the guard is up)."""
    if exc is None:
        return
    for _ in range(2):
        try:
            _checkpoint()
            return
        except exc:
            continue


def raise_in_thread(ident: int, exc: type[BaseException]) -> None:
    """Raise `exc` in thread `ident` at its next bytecode (CPython's asynchronous exceptions).

    Never withdrawn with a NULL exception: on CPython 3.11 that leaves the eval loop's
    asynchronous-exception flag set with nothing to raise, and the thread spins forever.
    """
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exc))


class TermHandler:
    """SIGTERM handled like Ctrl-C: the session stops the script and the report is written.

    A forked child (a DataLoader worker, a process the script forks) gets SIGTERM's default back
    and dies as it would without the doctor.
    """

    def __init__(self, on_term: Callable[[], None]) -> None:
        self.on_term = on_term
        self.pid = os.getpid()
        self._old: Any = None

    def install(self) -> None:
        """Take SIGTERM unless the script's process already set a handler of its own."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._old = signal.signal(signal.SIGTERM, self._handler)

    def restore(self) -> None:
        """Put the previous handler back if the script did not replace ours."""
        if self._old is None or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) == self._handler:
            signal.signal(signal.SIGTERM, self._old)
        self._old = None

    def _handler(self, signum: int, frame: Any) -> None:
        if os.getpid() != self.pid:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self.on_term()


def _loader_sigchld() -> Any:
    """torch's SIGCHLD handler for DataLoader workers when it is installed (main thread), else
    None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    handler = signal.getsignal(signal.SIGCHLD)
    if getattr(handler, "__module__", "") != "torch.utils.data._utils.signal_handling":
        return None
    return handler


def _child_ended(signum: int, frame: Any) -> None:
    """SIGCHLD, heard and let be. A Python function, not SIG_DFL: a SIGCHLD already pending
    when the handler changes would raise "Signal 17 ignored due to race condition"."""


def drop_loader_sigchld() -> Any:
    """The script is ending (an error, SIGTERM): torch's SIGCHLD handler for DataLoader workers
    would raise "worker killed" inside the doctor's own teardown as the workers exit. The
    handler dropped (None when none was): `restore_loader_sigchld` puts it back."""
    handler = _loader_sigchld()
    if handler is not None:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGCHLD, _child_ended)
    return handler


def restore_loader_sigchld(handler: Any) -> None:
    """The doctor's teardown is over: torch's handler back, as torch installs it once per
    process (a process that goes on after the run, its DataLoaders' workers watched again)."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGCHLD) is _child_ended:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGCHLD, handler)


# What torch's SIGCHLD check said of workers that died while it was held: torch's own later
# checks only say "exited unexpectedly", not that a signal (the out-of-memory killer) ended them.
_dead_workers: list[str] = []


def dead_workers() -> tuple[str, ...]:
    """torch's messages for DataLoader workers found dead as a held SIGCHLD handler came back
    ("DataLoader worker (pid 123) is killed by signal: Killed.")."""
    return tuple(_dead_workers)


@contextlib.contextmanager
def loader_sigchld_held() -> Iterator[None]:
    """While the doctor writes a trace: torch's SIGCHLD handler raises "DataLoader worker exited
    unexpectedly" at any bytecode once a worker dies (SIGTERM to the process group, as Slurm's
    scancel sends it, kills them with the script), and raised inside the export it lost the
    trace. The handler is put back after; a dead worker is still found by torch's own checks,
    and what torch's SIGCHLD check says of it is kept (`dead_workers`)."""
    handler = _loader_sigchld()
    if handler is not None:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGCHLD, _child_ended)
    try:
        yield
    finally:
        if handler is not None:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signal.SIGCHLD, handler)
            _note_dead_workers()


def _note_dead_workers() -> None:
    """Run torch's check of its workers (what its SIGCHLD handler runs) and keep what it says,
    without raising: the script meets the dead worker at its next batch, as without the hold."""
    try:
        from torch.utils.data._utils.signal_handling import _error_if_any_worker_fails

        _error_if_any_worker_fails()
    except RuntimeError as e:
        if str(e) not in _dead_workers:  # every later hold finds the same dead worker again
            _dead_workers.append(str(e))
    except Exception:  # a private torch function: a check that fails says nothing
        pass
