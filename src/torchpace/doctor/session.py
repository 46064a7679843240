"""The profiling session: hooks that find steps, warm-up, inspection, profiling, timing, stopping.

Step boundaries come from the hooks (doctor/hooks.py; doctor/steps.py decides which signal counts).
At each boundary the session moves through: warm-up -> watched steps (the last warm-up steps) ->
profiled steps -> timed steps (unprofiled: what the profiler itself costs) -> done, then stops the
script by raising `StopScript` at the next boundary (unless --full). Time (windows, the profiled
window's bounds, --max-seconds) comes from doctor/watchdog.py. Hooks may fire on any thread, so
boundaries are taken one at a time under a lock; whatever the watchdog asks for runs in the main
thread.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from torchpace.doctor import hooks
from torchpace.doctor.host import LoadSample, others_cores, sample_load
from torchpace.doctor.inspect import Inspector
from torchpace.doctor.patching import Patcher, user_location
from torchpace.doctor.processes import ProcessWatch
from torchpace.doctor.profiling import ProfileBounds, ProfilerWindow, recording_for
from torchpace.doctor.steps import Event, StepDetector
from torchpace.doctor.timing import StepClock
from torchpace.doctor.watchdog import TermHandler, Watchdog

Phase = Literal["warmup", "watch", "profile", "timed", "done", "aside"]


class StopScript(BaseException):
    """Raised inside the script at a step boundary once the doctor has what it needs.

    A BaseException, so the script's `except Exception` blocks let it through."""


class Terminated(StopScript):
    """SIGTERM arrived (timeout, Slurm, Kubernetes, CI): stop and report, as for Ctrl-C."""


@dataclass(frozen=True)
class DoctorOptions:
    """How to profile: warm-up and active steps, limits, and where traces go."""

    out_dir: Path
    warmup: int = 5
    steps: int = 10
    full: bool = False
    max_seconds: float | None = None
    profile_memory: bool = True
    watch_steps: int = 2  # the last warm-up steps watched by live inspection
    window_after_s: float = 10.0  # no signal at all (step, batch, backward) this long: windows
    window_s: float = 0.5
    rank: int | None = None
    world_size: int = 1
    timed_steps: int = 3  # unprofiled steps timed after the profiled ones (the profiler's cost)
    profile: bool = True  # False: no trace, only `timed_steps` timed after the warm-up
    bounds: ProfileBounds = field(default_factory=ProfileBounds)


@dataclass
class SessionState:
    """What the session counted; read by run.py to build the result."""

    phase: Phase = "warmup"
    boundaries: int = 0  # since the step signal was settled
    recorded: int = 0  # profiled steps completed
    restarts: int = 0
    trace_files: list[str] = field(default_factory=list)
    script_traces: list[str] = field(default_factory=list)  # traces the script's own profiler wrote
    notes: list[str] = field(default_factory=list)
    profile_started: float | None = None
    last_step_end: float | None = None  # time.perf_counter() when the last profiled step ended
    timed_out: bool = False
    terminated: bool = False  # SIGTERM
    exit_status: int | None = None  # os._exit(n) from the script, or the watchdog giving up
    child: bool = False  # this is a forked copy of the doctored process
    profiled_others_cores: float | None = None  # other processes' CPU use while profiling
    timed_others_cores: float | None = None


class Session:
    """Install hooks, count steps, drive torch.profiler, and stop the script when done."""

    def __init__(self, options: DoctorOptions) -> None:
        self.options = options
        self.out_dir = Path(os.path.abspath(options.out_dir))  # the script may chdir
        self.detector = StepDetector(settle=max(options.warmup + 1, 6))
        self.inspector = Inspector(options.world_size)
        self.processes = ProcessWatch()
        self.state = SessionState()
        self.clock = StepClock()
        self.patcher = Patcher()
        self.window: ProfilerWindow | None = None
        self.pid = os.getpid()
        self.inert = False  # a forked child: every hook passes straight through
        self.local = threading.local()  # optimizer-step depth, per thread
        self.stage: Any = None  # callable(str): what the doctor is doing now (progress output)
        self.on_give_up: Any = None  # callable(status): report now, the process is about to end
        self.threads: set[int] = set()  # threads that reached a hook
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._signals = 0  # optimizer steps, batches and backward calls seen
        self._next_window: float | None = None
        self._due: set[str] = set()  # what the watchdog asked the main thread to do
        self._stop_main = False
        self._starting_profiler = False
        self._load: LoadSample | None = None
        self._anchor: int | None = None  # the thread whose events delimit steps
        self._orphan: ProfilerWindow | None = None
        self._finish_asked = False  # the script stops: the recording thread finishes the trace
        self._writing = False  # a trace is being written (wait_for_threads waits for it)
        self._term = TermHandler(self._on_term)
        self.watchdog = Watchdog(due=self._check, on_poke=self.service)

    # --- installing hooks -------------------------------------------------------------------
    def install(self) -> None:
        """Patch torch, start the watchdog, and take SIGTERM."""
        global _CURRENT
        self.inspector.install()
        self.processes.install()
        hooks.install(self)
        self._old_excepthook = threading.excepthook
        threading.excepthook = self._excepthook
        _CURRENT = self
        self._started = time.monotonic()  # the script's time starts now, torch imported
        if self.options.max_seconds is not None:
            self.watchdog.deadline = self._started + self.options.max_seconds
        self.watchdog.stop_exception = StopScript
        self.watchdog.on_give_up = lambda: self.give_up("--max-seconds: the script did not stop", 0)
        self.watchdog.start()
        self._term.install()
        self._say("warming up")

    def restore(self) -> None:
        """Stop any profiling still running and undo every patch (never raises)."""
        global _CURRENT
        self.watchdog.stop()
        self._term.restore()
        if not self.inert:
            with self._lock:
                self._end(partial=True, final=True)
        self.inspector.restore()
        self.processes.restore()
        self.patcher.restore()
        if not self._other_threads():
            threading.excepthook = self._old_excepthook  # else a late thread's stop stays quiet
        _CURRENT = None

    def _excepthook(self, args: Any) -> None:
        if isinstance(args.exc_value, StopScript):
            return  # a training thread the doctor stopped: not an error
        self._old_excepthook(args)

    def _say(self, what: str) -> None:
        if self.stage is not None:
            self.stage(what)

    def owns_profiler(self, prof: Any) -> bool:
        """Whether a profiler object is (part of) the doctor's own recording."""
        own = self.window.prof if self.window is not None else None
        return self._starting_profiler or (
            own is not None and (prof is own or prof is own.profiler)
        )

    def signal_seen(self) -> None:
        """A hook saw an optimizer step, a batch or a backward call (time windows are then off)."""
        self._signals += 1

    # --- step boundaries (any thread) -------------------------------------------------------
    def on(self, event: Event) -> None:
        """A hook's event; raises StopScript in this thread once the doctor is done."""
        me = threading.get_ident()
        if me != self._anchor:
            self.threads.add(me)
            if self._anchor is None and event is not Event.NONE:
                self._anchor = me
            else:
                # Several training threads: one of them delimits steps (the profiler must start
                # and stop on one thread: torch's profiler aborts the process otherwise). The
                # others stop at any hook once the doctor is done (a thread whose optimizer never
                # delimits a step would otherwise train on while the interpreter shuts down).
                if self.state.phase == "done" and not self.options.full and self._anchor:
                    raise StopScript
                return
        elif self._finish_asked or "bound" in self._due:
            self._anchor_duty()
        if event is Event.NONE:
            return
        with self.watchdog.busy():
            with self._lock:
                if event is Event.RESTART:
                    self._restart()
                stop = self._boundary()
            if self._due or self._stop_main:
                self._after_release()
        if stop:
            raise StopScript

    def _after_release(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.service()
        else:
            self.watchdog.poke()

    def _restart(self) -> None:
        st = self.state
        if st.phase == "profile" and self.window is not None:
            self.window.discard()  # these steps were counted with a weaker signal
            self.window = None
        if st.phase in ("profile", "watch"):
            self.inspector.unwatch()
            self.inspector.watcher = None
        if st.phase not in ("aside", "timed", "done"):
            self.clock.restart()
            st.phase = "warmup"
            st.boundaries = 0
            st.recorded = 0
        st.restarts += 1

    def _boundary(self) -> bool:
        """One step ended (lock held); True when the script should stop now."""
        st, opts = self.state, self.options
        st.boundaries += 1
        self.clock.boundary(st.phase, st.boundaries)
        watcher = self.inspector.watcher
        if st.phase == "watch" and watcher is not None and watcher.active:
            watcher.step_done()
        if st.phase == "timed":
            self._timed_step()
        elif st.phase in ("warmup", "watch"):
            self._warmup_step()
        elif st.phase == "profile":
            st.recorded += 1
            if st.recorded >= opts.steps:
                self._finish(partial=False)
                self._start_timing()
            elif self.window is not None:
                self.window.step()
        if st.phase == "done" and not opts.full:
            if threading.current_thread() is not threading.main_thread():
                self._stop_main = True  # the main thread stops too (it may be in join())
            return True
        return False

    def _warmup_step(self) -> None:
        st, opts = self.state, self.options
        watched = min(opts.watch_steps, opts.warmup)
        # Time windows end in the main thread's signal handler, possibly inside a hook: installing
        # or removing hooks there is unsafe, so window runs are not watched. Under torch.compile,
        # global module hooks would make dynamo recompile at the first profiled step.
        unwatched = self.detector.mode == "window" or self.inspector.compiled
        starts = st.phase == "warmup" and st.boundaries > opts.warmup - watched and watched
        if starts and not unwatched:
            st.phase = "watch"
            self.inspector.watch(dispatch=len(self.threads) <= 1)
            self._say("watching the model and its inputs")
        if st.boundaries > opts.warmup:
            self.inspector.unwatch()
            self.inspector.capture_flags()
            if opts.profile:
                self._start_profiler()
            else:
                self._start_timing()

    def _start_profiler(self) -> None:
        import torch

        if torch.autograd._profiler_enabled():  # the C++ state: torch's Python flag can be stale
            self.step_aside()
            return
        cuda = torch.cuda.is_available()
        rec = recording_for(
            cuda=cuda, world_size=self.options.world_size, memory=self.options.profile_memory
        )
        window = ProfilerWindow(rec, self.options.bounds)
        self._starting_profiler = True
        try:
            window.start()
        finally:
            self._starting_profiler = False
        self.window = window
        self.state.notes.append(rec.describe())
        self.state.phase = "profile"
        self.detector.frozen = True  # the iteration's closing optimizer no longer changes
        self.state.profile_started = time.perf_counter()
        self._load = sample_load()
        self.clock.mark()
        self._say("profiling")

    def _start_timing(self) -> None:
        st = self.state
        if self.options.timed_steps <= 0 or self.detector.mode == "window":
            st.phase = "done"  # fixed time windows have no step time to compare
            return
        st.phase = "timed"
        self._load = sample_load()
        self.clock.mark()  # after the trace was written: the next step starts now
        self._say("timing steps without the profiler")

    def _timed_step(self) -> None:
        st = self.state
        if len(self.clock.after_ms) >= self.options.timed_steps:
            if self._load is not None:
                st.timed_others_cores = others_cores(self._load, sample_load())
            st.phase = "done"
            self._say("done")

    def _finish(self, *, partial: bool, cut: str = "") -> None:
        """Stop the profiler and write its trace (lock held; never raises)."""
        st, window = self.state, self.window
        st.last_step_end = time.perf_counter()
        self.window = None
        st.phase = "done"
        if window is None:
            return
        try:
            window.stop()
        except Exception as exc:  # e.g. a worker's death raised mid-stop: keep the run alive
            st.notes.append(f"the profiler could not stop cleanly ({type(exc).__name__}: {exc})")
            return
        if self._load is not None:
            st.profiled_others_cores = others_cores(self._load, sample_load())
        if cut:
            st.notes.append(f"{cut}: profiling stopped after {st.recorded} step(s)")
        if st.recorded == 0 and not cut:
            window.prof = None
            st.notes.append("profiling stopped before the first profiled step ended")
            return
        self._say("writing the trace")
        self._writing = True
        try:
            written = self._export(window)
        finally:
            self._writing = False
        if written is not None:
            st.trace_files.append(str(written))
            if partial:
                st.notes.append("the step running when profiling stopped is left out (unfinished)")

    def _export(self, window: ProfilerWindow) -> Path | None:
        path = self.trace_path()
        for folder in (path.parent, Path(tempfile.gettempdir()) / "torchpace-out"):
            target = folder / path.name
            try:
                folder.mkdir(parents=True, exist_ok=True)
                return window.export(target, self.state.recorded)
            except Exception as exc:  # the script deleted or filled its folder
                self.state.notes.append(f"could not write the trace to {folder}/ ({exc})")
                if window.prof is None:
                    return None
        return None

    def trace_path(self) -> Path:
        """Where this process's trace goes: a name TensorBoard's profiler plugin lists."""
        rank = self.options.rank if self.options.rank is not None else 0
        return self.out_dir / f"{socket.gethostname()}_rank{rank}.pt.trace.json.gz"

    def step_aside(self) -> None:
        """The script starts its own torch.profiler: stop recording and leave the run to it."""
        with self.watchdog.busy():
            self._step_aside()

    def _step_aside(self) -> None:
        st = self.state
        if st.phase == "aside":
            return
        where = user_location()
        if st.phase == "profile" and self.window is not None:
            self.window.discard()  # the script's own profiler takes over
            self.window = None
        self.inspector.unwatch()
        st.phase = "aside"
        st.notes.append(
            f"the script starts its own torch.profiler{f' at {where}' if where else ''}: "
            "torchpace stepped aside (two profilers cannot record at once), kept its live "
            "inspection, and let the script run to its end"
        )

    # --- time: windows, bounds, --max-seconds, SIGTERM (main thread) -------------------------
    def _check(self) -> bool:
        """The watchdog's question, asked from its thread every tick: is anything due?"""
        if self.inert:
            return False
        self.processes.sample()
        now, st, opts, det = time.monotonic(), self.state, self.options, self.detector
        if st.phase == "profile" and self.window is not None and self.window.over_bound():
            self._due.add("bound")
        # Time windows only for a script that has given no step signal at all (a slow step still
        # gives signals: an optimizer's closure, a batch, a backward call).
        if opts.window_after_s > 0 and st.phase not in ("done", "aside", "timed"):
            quiet = det.mode is None and not self._signals
            first = quiet and now - self._started >= opts.window_after_s
            window_due = det.mode == "window" and now >= (self._next_window or 0.0)
            if first or window_due:
                self._due.add("window")
        return bool(self._due) or self._stop_main

    def service(self) -> None:
        """Do what is due, in the main thread (the watchdog's signal, or after a boundary)."""
        if self.inert or not self.watchdog.in_script or _importing(sys._getframe(1)):
            return  # an exception raised inside an import would leave a half-made module
        with self.watchdog.busy():
            if not self._lock.acquire(blocking=False):
                return  # a boundary is in progress: it calls again when it is done
            try:
                stop = self._due_actions()
            finally:
                self._lock.release()
        if stop is not None:
            raise stop

    def _due_actions(self) -> type[StopScript] | None:
        st, opts, due = self.state, self.options, self._due
        if "term" in due:
            due.clear()
            st.terminated = True
            st.notes.append(
                "the script was stopped by SIGTERM (as timeout, Slurm or Kubernetes do)"
            )
            self._end(partial=True)
            return Terminated
        deadline = self.watchdog.deadline
        if deadline is not None and time.monotonic() >= deadline:
            if not st.timed_out:
                st.timed_out = True
                st.notes.append(f"stopped after --max-seconds {opts.max_seconds:g}")
            self._end(partial=True)
            return StopScript  # again at every tick until the script gives way
        if "bound" in due and self._anchor in (None, threading.get_ident()):
            self._cut_at_bound()
        if "window" in due:
            self._next_window = time.monotonic() + opts.window_s
            event = self.detector.window_tick()
            if event is not Event.NONE and self._boundary():
                due.clear()
                return StopScript
        due.clear()
        if self._stop_main and st.phase == "done" and not opts.full:
            self._stop_main = False
            return StopScript
        return None

    def _cut_at_bound(self) -> None:
        self._due.discard("bound")
        if self.state.phase == "profile" and self.window is not None:
            bound = self.window.over_bound()
            if bound is not None:
                self._finish(partial=True, cut=self.window.describe_bound(bound))
                self._start_timing()

    def _anchor_duty(self) -> None:
        """What only the recording thread may do (torch aborts the process when another thread
        stops its profiler): cut the window at a bound, or end it for a script that stops."""
        with self.watchdog.busy(), self._lock:
            stopping = self._finish_asked
            self._finish_asked = False
            if stopping:
                self._end(partial=True)
            else:
                self._cut_at_bound()
        if stopping:
            raise StopScript  # the script is stopping: this thread too

    def _end(self, *, partial: bool, final: bool = False) -> None:
        foreign = self._anchor not in (None, threading.get_ident())
        if foreign and self.state.phase == "profile" and not final:
            self._finish_asked = True  # the recording thread ends it at its next hook
            return
        if foreign and self.state.phase == "profile":
            self.state.notes.append(
                "profiling ran in another thread, which did not reach a step boundary before "
                "the script stopped: its trace is not written"
            )
            self._orphan, self.window = self.window, None  # never stopped from a foreign thread
        if self.state.phase == "profile":
            self._finish(partial=partial)
        if self.state.phase != "aside":
            self.state.phase = "done"

    def _on_term(self) -> None:
        self._due.add("term")
        self.service()

    def give_up(self, reason: str, status: int) -> None:
        """The process ends now (os._exit, or a script that never stops): keep what was
        captured and let the caller report it. Any thread; returns so the caller can exit."""
        if self.inert:
            return
        got = self._lock.acquire(timeout=2.0)
        try:
            self.state.notes.append(reason)
            self.state.exit_status = status
            if got:
                self._end(partial=True, final=True)
        finally:
            if got:
                self._lock.release()
        self.inert = True
        if self.on_give_up is not None:
            self.on_give_up(status)

    def wait_for_threads(self, timeout: float) -> list[str]:
        """Let other training threads reach a hook (where they stop); names of those still
        running. Polled, not joined: a stop raised while the script's main thread was in
        Thread.join() marks the joined thread finished although it runs on (CPython 3.11,
        bpo-45274), and interpreter shutdown then aborts the process inside it."""
        start = time.monotonic()
        running = self._other_threads()
        while running and time.monotonic() - start < (120.0 if self._writing else timeout):
            time.sleep(0.02)  # ...longer while another thread writes the trace
            running = self._other_threads()
        return [t.name for t in running]

    def _other_threads(self) -> list[threading.Thread]:
        """The script's threads that reached a hook and still run (listed until they end,
        whatever Thread.is_alive() says)."""
        me = threading.current_thread()
        return [t for t in threading.enumerate() if t.ident in self.threads and t is not me]

    def become_child(self) -> None:
        """After a fork, in the child: pass everything through; the parent reports."""
        self.inert = True
        self.state.child = True
        # The parent's recording: not this process's to stop or write. Freeing it in the child
        # spins in torch's profiler clean-up (torch 2.13), so it is kept until os._exit.
        self._parent_window, self.window = self.window, None
        self._lock = threading.Lock()  # a lock copied while held would never be released


_CURRENT: Session | None = None


def _importing(frame: Any) -> bool:
    """Whether the main thread is inside an import (the watchdog's action then waits a tick)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _after_fork_in_child() -> None:
    if _CURRENT is not None:
        _CURRENT.become_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
