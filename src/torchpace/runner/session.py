"""The profiling session: hooks that find steps, warm-up, inspection, profiling, timing, stopping.

Step boundaries come from the hooks (runner/hooks.py; runner/steps.py decides which signal counts).
At each boundary the session moves through the phases runner/phases.py decides (warm-up -> watched
steps -> profiled steps -> timed steps -> done), then stops the script by raising `StopScript` at
the next boundary (unless --full); runner/window.py carries out what they decide. Time (windows,
the profiled window's bounds) comes from runner/watchdog.py, --max-seconds from runner/deadline.py.
Hooks may fire on any thread: each thread counts its own steps, one thread's steps count
(runner/anchor.py), boundaries are taken one at a time under a lock, whatever the watchdog asks
for runs in the main thread, and the ranks of a job stop together (runner/ranks.py).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchpace.runner import hooks, phases
from torchpace.runner.anchor import Anchor
from torchpace.runner.deadline import Deadline
from torchpace.runner.follow import Follow
from torchpace.runner.options import DoctorOptions, SessionState, StopScript, Terminated
from torchpace.runner.patching import Patcher, user_location
from torchpace.runner.ranks import RankAgreement
from torchpace.runner.sensors.compile import NOTE_EVERY
from torchpace.runner.sensors.inspector import Inspector
from torchpace.runner.sensors.loader import LoaderRecord
from torchpace.runner.sensors.processes import ProcessWatch
from torchpace.runner.steps import Event, StepDetector, TimeWindows
from torchpace.runner.threads import ScriptThreads, importing, main_importing
from torchpace.runner.watchdog import TermHandler, Watchdog, drop_loader_sigchld
from torchpace.runner.window import Window


class Session:
    """Install hooks, count steps, drive torch.profiler, and stop the script when done."""

    def __init__(self, options: DoctorOptions) -> None:
        self.options = options
        self.out_dir = Path(os.path.abspath(options.out_dir))  # the script may chdir
        self.anchor = Anchor(settle=max(options.warmup + 1, 6), ticks=lambda: self.ranks.ticks)
        self.inspector = Inspector(options.world_size, memory=options.profile_memory)
        self.processes = ProcessWatch()
        self.state = SessionState()
        self.ranks = RankAgreement()  # where the ranks of a job stop together
        self.patcher = Patcher()
        self.window = Window(options, self.out_dir, self.state, self.inspector, self._say)
        rank = options.rank if options.world_size > 1 else None
        self.follow = Follow(self.out_dir, rank) if options.follow else None
        if self.follow is not None:
            self.window.own = self.follow.own
            self.follow.epoch_limit = options.epochs
            self.follow.on_limit = self._epochs_reached
        self.recorder = self.window.recorder
        self._runs_on = options.runs_to_end  # --full, --follow: read at every step
        self.pid = os.getpid()
        self.inert = False  # a forked child: every hook passes straight through
        self.local = threading.local()  # optimizer-step depth, per thread
        self.fed: LoaderRecord | None = None  # the last profiled batch's loader, until a backward
        self.last_loader: LoaderRecord | None = None  # the loader of the last batch, any phase
        # A settled run (--full, --follow) whose steps are optimizer steps: in the thread that
        # counts them, batches and backward calls can end no step and need not be counted.
        self.quiet_thread: int | None = None
        self._counting = self.anchor.detector  # that thread's step count, once settled
        self._compiles = self.inspector.compiles  # counted at each settled step
        self._settled_at: int | None = None  # the ranks' clock at the first settled step
        # What the doctor is doing now (progress output); report now, the process is ending.
        self.stage: Callable[[str], None] | None = None
        self._said = ""
        self.on_give_up: Callable[[int], None] | None = None
        self.threads = ScriptThreads()  # the script's threads that reached a hook
        self._lock = threading.Lock()
        self.time_windows = TimeWindows(options.window_after_s, options.window_s, time.monotonic())
        self._due: set[str] = set()  # what the watchdog asked the main thread to do
        self._stop_main = False
        self._finish_asked = False  # the script stops: the recording thread finishes the trace
        self._term = TermHandler(self._on_term)
        self.watchdog = Watchdog(due=self._check, on_poke=self.service)
        self.deadline = Deadline(options.max_seconds, self.watchdog, self.ranks, self.state)

    # --- installing hooks -------------------------------------------------------------------
    def install(self) -> None:
        """Patch torch, start the watchdog, and take SIGTERM."""
        global _CURRENT
        self.inspector.install()
        self.processes.install()
        hooks.install(self)
        if self.follow is not None:
            self.follow.install(self.patcher, self.inspector)
        self.threads.quiet(StopScript)
        _CURRENT = self
        started = time.monotonic()  # the script's time starts now, torch imported
        self.time_windows.quiet_since = started
        self.deadline.start(started)
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
                self._note_early_end()
                self._end(partial=True, final=True)
        if self.follow is not None:
            self.follow.uninstall()
        self.inspector.restore()
        self.processes.restore()
        self.patcher.restore()
        self.threads.unquiet()
        _CURRENT = None

    def _note_early_end(self) -> None:
        """Why a window the script's end cut holds fewer steps than asked (mnist_hogwild's
        evaluation read 6 batches into it: "6 of 10 steps profiled (the notes say why)", and
        no note did)."""
        st, steps = self.state, self.options.steps
        if st.phase == "profile" and st.recorded < steps:
            st.notes.append(
                f"the script ended after {st.recorded} of the {steps} profiled steps asked"
            )

    def _say(self, what: str) -> None:
        if self.stage is not None and what != self._said:  # a line per step only when it moves
            self._said = what
            self.stage(what)

    @property
    def timing_math(self) -> bool:
        """Whether the steps at fewer threads are profiled for their matmuls (runner/window.py)."""
        return self.window.timing_math

    def owns_profiler(self, prof: Any) -> bool:
        """Whether a profiler object is (part of) the doctor's own recording."""
        follow = self.follow is not None and self.follow.owns(prof)
        return self.recorder.owns(prof) or follow or self.window.owns(prof)

    def signal_seen(self) -> None:
        """A hook saw an optimizer step, a batch or a backward call (time windows are then off)."""
        self.time_windows.signals += 1
        follow = self.follow
        if follow is not None and follow.ledger.base == "start-up":
            follow.signal()  # the first one ends the run's start-up

    # --- step boundaries (any thread) -------------------------------------------------------
    @property
    def detector(self) -> StepDetector:
        """The step count that counts: the anchor thread's (the main thread's before any)."""
        return self.anchor.detector

    def on(self, decide: Callable[[StepDetector], Event]) -> None:
        """A hook's event, as `decide` reads it from this thread's own step count; raises
        StopScript in this thread once the doctor is done."""
        me, anchor = threading.get_ident(), self.anchor
        if me != anchor.thread:
            counted = self.detector.mode  # before this event: what delimits steps now
            event = self._adopt(me, decide(anchor.detector_of(me)), counted)
            self.threads.seen.add(me)
            if event is Event.NONE:
                # Several training threads: one of them delimits steps (the profiler must start
                # and stop on one thread: torch's profiler aborts the process otherwise). The
                # others stop at any hook once the doctor is done (a thread whose optimizer never
                # delimits a step would otherwise train on while the interpreter shuts down).
                if anchor.thread and not self.options.runs_to_end and self._done():
                    raise StopScript
                return
        else:
            event = decide(anchor.detector_of(me))
            if anchor.handover is not None:
                with self.watchdog.busy(), self._lock:
                    self._take_handover()
                return
            if self._finish_asked or "bound" in self._due:
                self._anchor_duty()
        if event is Event.NONE:
            return
        with self.watchdog.busy():
            with self._lock:
                if event is Event.RESTART:
                    self.window.restart()
                stop = self._boundary()
            if self._due or self._stop_main:
                self._after_release()
        if stop:
            raise StopScript

    def settled_step(self, opt_id: int) -> None:
        """An optimizer step in the counting thread of a settled run (--full, --follow after its
        window): its boundary without `on`'s thread and anchor bookkeeping, which has nothing
        left to decide (every step of a long run passes here: runner/follow.py's cost)."""
        follow = self.follow
        if self.anchor.handover is not None or self._finish_asked or self._due or self._stop_main:
            if follow is not None:
                follow.optimizer_step()
            self.on(lambda det: det.optimizer_step(opt_id))  # something to do: the whole path
            return
        det = self._counting
        # Frozen since profiling began: the anchor optimizer's steps end iterations, and
        # counting them changes nothing (another optimizer's are counted, as in `on`).
        anchored = det.frozen and opt_id == det.anchor
        # A typical step needs no guard (no deadline) and no lock (the counts and the watch).
        if (
            anchored
            and self.watchdog.deadline is None
            and (follow is None or follow.settled_step(self.state.phase))
        ):
            ticks = self.ranks.ticks = self.ranks.ticks + 1  # _count_settled's, inline: a call
            if not ticks % NOTE_EVERY:  # costs ~1 us in a real step (docs/doctor.md)
                self._compiles.note()
            return
        if follow is not None:
            follow.optimizer_step()
        if anchored or det.optimizer_step(opt_id) is Event.BOUNDARY:
            self._guarded_settled_boundary()

    def _guarded_settled_boundary(self) -> None:
        with self.watchdog.busy():
            with self._lock:
                self._settled_boundary()
            if self._due or self._stop_main:  # the watchdog asked meanwhile
                self._after_release()

    def _done(self) -> bool:
        # Confirmed under the lock: while the trace is written the phase reads "done" until
        # timing starts, and a prefetch thread stopped then would starve the training thread.
        if self.state.phase != "done":
            return False
        with self._lock:
            return self.state.phase == "done"

    def _adopt(self, me: int, event: Event, counted: Any) -> Event:
        """This thread's event when its steps count from now on (runner/anchor.py), else NONE."""
        if event is Event.NONE or not self.anchor.may_take_over(me, counted):
            return Event.NONE
        with self._lock:
            return self.anchor.adopt(me, event, counted, self.state.phase)

    def _take_handover(self) -> None:
        """In the recording thread (lock held): drop its recording, let the stronger thread count."""
        if self.anchor.take_handover(self.state.phase):
            self.window.restart()

    def _after_release(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.service()
        else:
            self.watchdog.poke()

    def _boundary(self) -> bool:
        """One step ended (lock held); True when the script should stop now."""
        st, opts, follow = self.state, self.options, self.follow
        if self._runs_on and st.phase in phases.SETTLED:  # every later step of --full/--follow
            if self.quiet_thread is None and self.detector.mode == "optimizer":
                self.quiet_thread = self.anchor.thread
                self._counting = self.detector
            if self._settled_at is None:  # torch.compile's steps after warm-up count on here
                self._settled_at = at = self.ranks.ticks
                self._compiles.settled = lambda: self.ranks.ticks - at
            self._settled_boundary()
            return False
        st.boundaries += 1
        self.ranks.ticks += 1
        if follow is not None:
            follow.profiling = st.phase == "profile"  # the step just ended was profiled
        self.window.boundary()
        watchable = self.detector.mode != "window" and not self.inspector.compiled
        st.recorded, actions = phases.at_boundary(self.window.counts(), opts, watchable=watchable)
        for action in actions:
            self._act(action)
        if self.stage is not None and st.phase != "aside":
            self._say(phases.progress(self.window.counts(), opts))
        if follow is not None:
            follow.boundary(st.phase, self.detector.steps_ended)
        if opts.runs_to_end or not self._stops_here():
            return False
        if threading.current_thread() is not threading.main_thread():
            self._stop_main = True  # the main thread stops too (it may be in join())
        return True

    def _settled_boundary(self) -> None:
        """What a step of a settled run ends (lock held): the counts, torch.compile's, --follow's
        watch; nothing is left to decide."""
        self._count_settled()
        follow = self.follow
        if follow is not None:
            follow.profiling = False
            owed = self.detector.owed  # an optimizer took over here (StepDetector.steps_ended)
            follow.boundary(self.state.phase, self.detector.steps_ended if owed else None)

    def _count_settled(self) -> None:
        """A settled run's step ended: the ranks' clock, and torch.compile's count
        (`state.boundaries` is not counted on: nothing reads it after the window)."""
        ticks = self.ranks.ticks = self.ranks.ticks + 1
        if not ticks % NOTE_EVERY:
            self._compiles.note()

    def _epochs_reached(self) -> None:
        """--follow --epochs N: the training loader starts epoch N+1 (its iter() or first
        batch), after epoch N's evaluation and checkpoint: stop the script here."""
        st, n = self.state, self.options.epochs or 0
        with self.watchdog.busy(), self._lock:
            if not st.epochs_reached:
                st.epochs_reached = True
                st.notes.append(
                    f"stopped as the training loader began epoch {n + 1} (--epochs {n}: epoch "
                    f"{n}'s evaluation and checkpoint are in)"
                )
            self._end(partial=True)
        if threading.current_thread() is not threading.main_thread():
            self._stop_main = True  # the main thread stops too (it may be in join())
            self.watchdog.poke()
        raise StopScript

    def _act(self, action: phases.Action) -> None:
        """Carry out one of runner/phases.py's actions (lock held)."""
        if action != "start_profiler":
            window, here = self.detector.mode == "window", self.anchor.here()
            seen = self.threads.seen
            # The anchor's own thread is among those seen once it was adopted: alone is no other.
            alone = not seen - {self.anchor.thread}
            self.window.act(action, window=window, here=here, dispatch=len(seen) <= 1, alone=alone)
        elif self.window.start_profiler():
            self.detector.freeze()  # the iteration's closing optimizer no longer changes
        else:
            self.step_aside()

    def _stops_here(self) -> bool:
        """Whether the script stops at this boundary: when this session is done, or, for one
        rank of several, at the boundary the ranks agreed on (runner/ranks.py)."""
        st = self.state
        if not self.ranks.active():
            return st.phase == "done"
        if not self.ranks.stops_here(done=st.phase == "done", notes=st.notes):
            return False
        self._end(partial=False)
        return True

    def step_aside(self) -> None:
        """The script starts its own torch.profiler: stop recording and leave the run to it."""
        with self.watchdog.busy():
            self.window.aside(user_location())

    # --- time: windows, bounds, --max-seconds, SIGTERM (main thread) -------------------------
    def _check(self) -> bool:
        """The watchdog's question, asked from its thread every tick: is anything due?"""
        if self.inert:
            return False
        self.processes.sample()
        now, st, opts, det = time.monotonic(), self.state, self.options, self.detector
        if self.deadline.passed():
            # Done at the next step boundary too, where the script's own signal handlers cannot
            # keep the poke from it; noted now, whoever ends the script.
            self._due.add("deadline")
            if not self.ranks.active():
                self.deadline.note()
        if st.phase == "profile" and self.recorder.over_bound():
            self._due.add("bound")
        elif st.phase in ("warmup", "watch"):
            self.window.footprint.sample()
        counting = opts.window_after_s > 0 and st.phase not in ("done", "aside", "timed", "probe")
        if counting and self.time_windows.due(
            now, det.mode, lambda: main_importing() or not self.inspector.module_ran
        ):
            self._due.add("window")
        windows_handover = (
            self.anchor.handover is not None and self.anchor.thread == threading.main_thread().ident
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

    # complex: the due actions in priority order (SIGTERM, deadline, bound, window), one return
    # each.
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
        if self.deadline.passed() and self.deadline.agreed():
            return None
        if self.deadline.passed():
            self.deadline.note()
            self._end(partial=True)
            return StopScript  # again at every tick until the script gives way
        anchor = self.anchor
        if "bound" in due and anchor.here():
            self._cut_at_bound()
        if anchor.handover is not None and anchor.thread == threading.get_ident():
            self._take_handover()
        if "window" in due:
            self.time_windows.next_end = time.monotonic() + opts.window_s
            if anchor.thread is None:
                anchor.thread = threading.get_ident()  # windows end here: so does the profiler
            event = self.detector.window_tick()
            if event is not Event.NONE and self._boundary():
                due.clear()
                return StopScript
        due.clear()
        if self._stop_main and st.phase == "done" and (not opts.runs_to_end or st.epochs_reached):
            self._stop_main = False
            return StopScript
        return None

    def _cut_at_bound(self) -> None:
        self._due.discard("bound")
        window = self.detector.mode == "window"
        cut = self.window.cut_at_bound(window=window, here=self.anchor.here())
        if cut and window and self.state.phase == "done":
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
        if not self.window.end(partial=partial, here=self.anchor.here(), final=final):
            self._finish_asked = True  # the recording thread ends it at its next hook

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
        if self.follow is not None:
            self.follow.inert = True
        self.state.child = True
        self.recorder.abandon()  # the parent's recording: not this process's to stop or write
        self._lock = threading.Lock()  # a lock copied while held would never be released


_CURRENT: Session | None = None


def _after_fork_in_child() -> None:
    if _CURRENT is not None:
        _CURRENT.become_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
