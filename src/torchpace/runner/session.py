"""The profiling session: hooks that find steps, warm-up, inspection, profiling, timing, stopping.

Step boundaries come from the hooks (runner/hooks.py; runner/steps.py decides which signal counts).
At each boundary the session moves through: warm-up -> watched steps (the last warm-up steps) ->
profiled steps -> timed steps (unprofiled: what the profiler itself costs) -> done, then stops the
script by raising `StopScript` at the next boundary (unless --full). Time (windows, the profiled
window's bounds, --max-seconds) comes from runner/watchdog.py. Hooks may fire on any thread: each
thread counts its own steps, the steps of one thread (the first with a step signal, or a later one
with a stronger signal) are the ones that count, boundaries are taken one at a time under a lock,
and whatever the watchdog asks for runs in the main thread.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchpace.runner import hooks
from torchpace.runner.load import LoadSample, others_cores, sample_load, thread_ready_s
from torchpace.runner.options import DoctorOptions, SessionState, StopScript, Terminated
from torchpace.runner.patching import Patcher, user_location
from torchpace.runner.profiling import StepFootprint
from torchpace.runner.ranks import RankAgreement
from torchpace.runner.recorder import Recorder
from torchpace.runner.sensors.inspector import Inspector
from torchpace.runner.sensors.processes import ProcessWatch
from torchpace.runner.steps import Event, StepDetector, outranks
from torchpace.runner.threads import ScriptThreads, importing
from torchpace.runner.timing import StepClock
from torchpace.runner.watchdog import (
    TermHandler,
    Watchdog,
    drop_loader_sigchld,
    loader_sigchld_held,
)

# After --max-seconds, how long the ranks of a job get to reach the step they agreed to stop at.
DEADLINE_GRACE_S = 30.0


class Session:
    """Install hooks, count steps, drive torch.profiler, and stop the script when done."""

    def __init__(self, options: DoctorOptions) -> None:
        self.options = options
        self.out_dir = Path(os.path.abspath(options.out_dir))  # the script may chdir
        self._settle = max(options.warmup + 1, 6)
        self._detectors: dict[int | None, StepDetector] = {}  # thread id -> its own step count
        self.inspector = Inspector(options.world_size)
        self.processes = ProcessWatch()
        self.state = SessionState()
        self.clock = StepClock()
        self.footprint = StepFootprint()  # the script's own in-step memory rise (warm-up)
        self.ranks = RankAgreement()  # where the ranks of a job stop together
        self._ticks = 0  # boundaries counted since the start, never reset (the ranks' clock)
        self.patcher = Patcher()
        self.recorder = Recorder(options, self.out_dir, self.state.notes, self.state.trace_files)
        self.pid = os.getpid()
        self.inert = False  # a forked child: every hook passes straight through
        self.local = threading.local()  # optimizer-step depth, per thread
        self.stage: Any = None  # callable(str): what the doctor is doing now (progress output)
        self.on_give_up: Any = None  # callable(status): report now, the process is about to end
        self.threads = ScriptThreads()  # the script's threads that reached a hook
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._signals = 0  # optimizer steps, batches and backward calls seen
        self._next_window: float | None = None
        self._due: set[str] = set()  # what the watchdog asked the main thread to do
        self._stop_main = False
        self._load: LoadSample | None = None
        self._ready0: float | None = None  # the recording thread's run-queue wait at its start
        self._anchor: int | None = None  # the thread whose events delimit steps
        self._handover: int | None = None  # a thread with a stronger signal, waiting to count
        self._finish_asked = False  # the script stops: the recording thread finishes the trace
        self._deadline_proposed = False  # the ranks were asked to stop for --max-seconds
        self._term = TermHandler(self._on_term)
        self.watchdog = Watchdog(due=self._check, on_poke=self.service)

    # --- installing hooks -------------------------------------------------------------------
    def install(self) -> None:
        """Patch torch, start the watchdog, and take SIGTERM."""
        global _CURRENT
        self.inspector.install()
        self.processes.install()
        hooks.install(self)
        self.threads.quiet(StopScript)
        _CURRENT = self
        self._started = time.monotonic()  # the script's time starts now, torch imported
        if self.options.max_seconds is not None:
            self.watchdog.deadline = self._started + self.options.max_seconds
        self.watchdog.stop_exception = StopScript
        self.watchdog.on_give_up = lambda: self.give_up("--max-seconds: the script did not stop", 0)
        self.watchdog.start()
        self._term.install()
        self._say(f"warm-up 0/{self.options.warmup} steps (waiting for the first)")

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
        self.threads.unquiet()
        _CURRENT = None

    def _say(self, what: str) -> None:
        if self.stage is not None:
            self.stage(what)

    def owns_profiler(self, prof: Any) -> bool:
        """Whether a profiler object is (part of) the doctor's own recording."""
        return self.recorder.owns(prof)

    def signal_seen(self) -> None:
        """A hook saw an optimizer step, a batch or a backward call (time windows are then off)."""
        self._signals += 1

    # --- step boundaries (any thread) -------------------------------------------------------
    @property
    def detector(self) -> StepDetector:
        """The step count that counts: the anchor thread's (the main thread's before any)."""
        key = self._anchor if self._anchor is not None else threading.main_thread().ident
        return self._detector_of(key)

    def _detector_of(self, thread: int | None) -> StepDetector:
        det = self._detectors.get(thread)
        if det is None:
            det = self._detectors.setdefault(thread, StepDetector(settle=self._settle))
        return det

    def on(self, decide: Callable[[StepDetector], Event]) -> None:
        """A hook's event, as `decide` reads it from this thread's own step count; raises
        StopScript in this thread once the doctor is done."""
        me = threading.get_ident()
        if me != self._anchor:
            counted = self.detector.mode  # before this event: what delimits steps now
            event = self._adopt(me, decide(self._detector_of(me)), counted)
            self.threads.seen.add(me)
            if event is Event.NONE:
                # Several training threads: one of them delimits steps (the profiler must start
                # and stop on one thread: torch's profiler aborts the process otherwise). The
                # others stop at any hook once the doctor is done (a thread whose optimizer never
                # delimits a step would otherwise train on while the interpreter shuts down).
                if self._anchor and not self.options.full and self._done():
                    raise StopScript
                return
        else:
            event = decide(self._detector_of(me))
            if self._handover is not None:
                self._hand_over()
                return
            if self._finish_asked or "bound" in self._due:
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

    def _done(self) -> bool:
        # Confirmed under the lock: while the trace is written the phase reads "done" until
        # timing starts, and a prefetch thread stopped then would starve the training thread.
        if self.state.phase != "done":
            return False
        with self._lock:
            return self.state.phase == "done"

    def _adopt(self, me: int, event: Event, counted: Any) -> Event:
        """This thread's event when its steps count from now on, else NONE. A thread counts when
        it gives the first step signal, or a stronger one than the counted thread's (a prefetch
        thread's batches, then the main thread's optimizer steps): steps are counted again."""
        if event is Event.NONE:
            return event
        mine = self._detector_of(me).mode
        if self._anchor is not None and not outranks(mine, counted):
            return Event.NONE
        with self._lock:
            phase = self.state.phase
            if phase == "profile" and self._anchor is not None:
                self._handover = me  # the profiler stops in the thread that started it
                return Event.NONE
            if phase in ("aside", "timed", "done") and self._anchor is not None:
                return Event.NONE  # the first thread to signal still counts steps (ranks agree)
            self._anchor = me
        return Event.RESTART if counted is not None else event

    def _hand_over(self) -> None:
        with self.watchdog.busy(), self._lock:
            self._take_handover()

    def _take_handover(self) -> None:
        """In the recording thread (lock held): drop its recording, let the stronger thread count."""
        if self.state.phase in ("profile", "warmup", "watch"):
            self._restart()
            self._anchor = self._handover
        self._handover = None

    def _after_release(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.service()
        else:
            self.watchdog.poke()

    def _restart(self) -> None:
        st = self.state
        if st.phase == "profile":
            self.recorder.discard()  # these steps were counted with a weaker signal
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
        self._ticks += 1
        self.clock.boundary(st.phase, st.boundaries)
        watcher = self.inspector.watcher
        if st.phase == "watch" and watcher is not None and watcher.active:
            watcher.step_done()
        if st.phase == "timed":
            self._timed_step()
        elif st.phase in ("warmup", "watch"):
            self.footprint.boundary()
            self._warmup_step()
        elif st.phase == "profile":
            st.recorded += 1
            if st.recorded >= opts.steps:
                self._finish(partial=False)
                self._start_timing()
            else:
                self.recorder.step()
                self._end_before_bound()
        if self.stage is not None:
            self._progress()
        if opts.full or not self._stops_here():
            return False
        if threading.current_thread() is not threading.main_thread():
            self._stop_main = True  # the main thread stops too (it may be in join())
        return True

    def _stops_here(self) -> bool:
        """Whether the script stops at this boundary: when this session is done, or, for one
        rank of several, at the boundary the ranks agreed on (runner/ranks.py)."""
        st = self.state
        if not self.ranks.active():
            return st.phase == "done"
        if st.phase == "done":
            self.ranks.propose(self._ticks, "its window was profiled and timed")
        agreed = self.ranks.stop_at()
        if agreed is None or self._ticks < agreed.boundary:
            return False
        if agreed.rank != self.ranks.rank or agreed.why != "its window was profiled and timed":
            st.notes.append(agreed.describe(self.ranks.rank))
        self._end(partial=False)
        return True

    def _end_before_bound(self) -> None:
        """End the window here, with whole steps, when one more step would pass a bound."""
        bound = self.recorder.next_step_over_bound()
        if bound is not None:
            self._finish(partial=False, cut=self.recorder.describe_bound(bound))
            self._start_timing()

    def _progress(self) -> None:
        """Say where the run is, after a boundary (the progress line counts steps)."""
        st, opts = self.state, self.options
        if st.phase in ("warmup", "watch"):
            watching = ", watching the model" if st.phase == "watch" else ""
            self._say(f"warm-up {st.boundaries}/{opts.warmup} steps{watching}")
        elif st.phase == "profile":
            self._say(f"profiling {st.recorded}/{opts.steps} steps")
        elif st.phase == "timed":
            n = len(self.clock.after_ms)
            self._say(f"timing steps without the profiler {n}/{opts.timed_steps}")
        elif st.phase == "done":
            self._say("profiled: the script runs to its end (--full)" if opts.full else "done")

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
            self.inspector.watch(dispatch=len(self.threads.seen) <= 1)
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
        self.recorder.start(cuda=torch.cuda.is_available(), script=self.footprint)
        self.state.phase = "profile"
        self.detector.frozen = True  # the iteration's closing optimizer no longer changes
        self.state.profile_started = time.perf_counter()
        self._load = sample_load()
        self._ready0 = thread_ready_s()
        self.clock.mark()

    def _start_timing(self) -> None:
        st = self.state
        if self.options.timed_steps <= 0 or self.detector.mode == "window":
            st.phase = "done"  # fixed time windows have no step time to compare
            return
        st.phase = "timed"
        self._load = sample_load()
        self.clock.mark()  # after the trace was written: the next step starts now

    def _timed_step(self) -> None:
        st = self.state
        if len(self.clock.after_ms) >= self.options.timed_steps:
            if self._load is not None:
                st.timed_others_cores = others_cores(self._load, sample_load())
            st.phase = "done"

    def _finish(self, *, partial: bool, cut: str = "") -> None:
        """Stop the profiler and write its trace (lock held; never raises), with torch's
        SIGCHLD handler for DataLoader workers held off meanwhile (watchdog.loader_sigchld_held)."""
        with loader_sigchld_held():
            self._stop_and_write(partial=partial, cut=cut)

    def _stop_and_write(self, *, partial: bool, cut: str) -> None:
        st = self.state
        st.last_step_end = time.perf_counter()
        st.phase = "done"
        window = self.recorder.stop()
        if window is None:
            return
        if self._load is not None:
            st.profiled_others_cores = others_cores(self._load, sample_load())
        ready = thread_ready_s() if self._anchor in (None, threading.get_ident()) else None
        if ready is not None and self._ready0 is not None and st.recorded:
            st.profiled_ready_ms = (ready - self._ready0) * 1000.0 / st.recorded
        if cut:
            st.notes.append(f"{cut}: profiling stopped after {st.recorded} step(s)")
        if st.recorded == 0 and not cut:
            window.prof = None
            st.notes.append("profiling stopped before the first profiled step ended")
            return
        self._say("writing the trace")
        if self.recorder.write(window, st.recorded) is not None and partial:
            st.notes.append("the step running when profiling stopped is left out (unfinished)")

    def step_aside(self) -> None:
        """The script starts its own torch.profiler: stop recording and leave the run to it."""
        with self.watchdog.busy():
            self._step_aside()

    def _step_aside(self) -> None:
        st = self.state
        if st.phase == "aside":
            return
        where = user_location()
        if st.phase == "profile":
            self.recorder.discard()  # the script's own profiler takes over
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
        deadline = self.watchdog.deadline
        if deadline is not None and now >= deadline:
            # Done at the next step boundary too, where the script's own signal handlers cannot
            # keep the poke from it; noted now, whoever ends the script.
            self._due.add("deadline")
            if not self.ranks.active():
                self._note_deadline()
        if st.phase == "profile" and self.recorder.over_bound():
            self._due.add("bound")
        elif st.phase in ("warmup", "watch"):
            self.footprint.sample()
        # Time windows only for a script that has given no step signal at all (a slow step still
        # gives signals: an optimizer's closure, a batch, a backward call).
        if opts.window_after_s > 0 and st.phase not in ("done", "aside", "timed"):
            quiet = det.mode is None and not self._signals
            if quiet and (_main_importing() or not self.inspector.module_ran):
                self._started = now  # quiet time counts from the last import, once a model ran
            first = quiet and now - self._started >= opts.window_after_s
            window_due = det.mode == "window" and now >= (self._next_window or 0.0)
            if first or window_due:
                self._due.add("window")
        windows_handover = (
            self._handover is not None and self._anchor == threading.main_thread().ident
        )
        return bool(self._due) or self._stop_main or windows_handover

    def service(self) -> None:
        """Do what is due, in the main thread (the watchdog's signal, or after a boundary)."""
        if self.inert or not self.watchdog.in_script or importing(sys._getframe(1)):
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
            said = "the script was stopped by SIGTERM (as timeout, Slurm or Kubernetes do)"
            if said not in st.notes:
                st.notes.append(said)
            self._end(partial=True)
            return Terminated
        deadline = self.watchdog.deadline
        if deadline is not None and time.monotonic() >= deadline and self._deadline_agreed():
            return None
        if deadline is not None and time.monotonic() >= deadline:
            self._note_deadline()
            self._end(partial=True)
            return StopScript  # again at every tick until the script gives way
        if "bound" in due and self._anchor in (None, threading.get_ident()):
            self._cut_at_bound()
        if self._handover is not None and self._anchor == threading.get_ident():
            self._take_handover()
        if "window" in due:
            self._next_window = time.monotonic() + opts.window_s
            if self._anchor is None:
                self._anchor = threading.get_ident()  # windows end here: so does the profiler
            event = self.detector.window_tick()
            if event is not Event.NONE and self._boundary():
                due.clear()
                return StopScript
        due.clear()
        if self._stop_main and st.phase == "done" and not opts.full:
            self._stop_main = False
            return StopScript
        return None

    def _note_deadline(self) -> None:
        """--max-seconds has passed: say so once (from any thread: a script that swallows the
        doctor's signal is stopped by the watchdog alone, and must not read as stopped after its
        window)."""
        st = self.state
        if not st.timed_out:
            st.timed_out = True
            st.notes.append(f"stopped after --max-seconds {self.options.max_seconds:g}")

    def _deadline_agreed(self) -> bool:
        """One rank of several at --max-seconds: ask every rank to stop at a step boundary
        soon (stopped at once, it could leave the others in a collective) and give them
        DEADLINE_GRACE_S to get there before stopping anywhere."""
        if self._deadline_proposed or not self.ranks.active():
            return False
        self._deadline_proposed = True
        self._note_deadline()
        self.ranks.propose(self._ticks, "--max-seconds")
        self.watchdog.deadline = time.monotonic() + DEADLINE_GRACE_S
        return True

    def _cut_at_bound(self) -> None:
        self._due.discard("bound")
        if self.state.phase == "profile":
            bound = self.recorder.over_bound()
            if bound is not None:
                self._finish(partial=True, cut=self.recorder.describe_bound(bound))
                self._start_timing()
                if self.detector.mode == "window" and self.state.phase == "done":
                    self._stop_main = True  # no further window ends: stop the script here

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
            self.recorder.abandon()
        if self.state.phase == "profile":
            self._finish(partial=partial)
        if self.state.phase != "aside":
            self.state.phase = "done"

    def _on_term(self) -> None:
        # SIGTERM to the process group (Slurm's scancel, `kill -TERM -PGID`) ends the DataLoader
        # workers too: torch's SIGCHLD handler would then raise "worker killed" in the script,
        # before or instead of the stop. The script is stopping: their end is expected.
        drop_loader_sigchld()
        self.state.terminated = True
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
        running (longer while another thread writes the trace)."""
        return self.threads.wait(timeout, longer=lambda: self.recorder.writing)

    def become_child(self) -> None:
        """After a fork, in the child: pass everything through; the parent reports."""
        self.inert = True
        self.state.child = True
        self.recorder.abandon()  # the parent's recording: not this process's to stop or write
        self._lock = threading.Lock()  # a lock copied while held would never be released


def _main_importing() -> bool:
    """Whether the main thread is inside an import now (read from the watchdog's thread)."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    return frame is not None and importing(frame)


_CURRENT: Session | None = None


def _after_fork_in_child() -> None:
    if _CURRENT is not None:
        _CURRENT.become_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
