"""The profiling session: hooks that find steps, warm-up, inspection, profiling, and stopping.

Step boundaries come from the hooks (doctor/steps.py decides which signal counts). At each boundary
the session moves through: warm-up -> watched steps (the last warm-up steps) -> profiled steps ->
done, and then stops the script by raising `StopScript` at the next boundary (unless --full).
"""

from __future__ import annotations

import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from torchpace.doctor.inspect import Inspector
from torchpace.doctor.patching import Patcher, user_location
from torchpace.doctor.steps import Event, StepDetector

Phase = Literal["warmup", "watch", "profile", "done", "aside"]
_TICK_S = 0.05  # alarm resolution for time windows and --max-seconds


class StopScript(BaseException):
    """Raised inside the script at a step boundary once the doctor has what it needs.

    A BaseException, so the script's `except Exception` blocks let it through."""


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
    window_after_s: float = 10.0  # no signal (step, batch, backward) this long: time windows
    window_s: float = 0.5
    rank: int | None = None
    world_size: int = 1


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


class Session:
    """Install hooks, count steps, drive torch.profiler, and stop the script when done."""

    def __init__(self, options: DoctorOptions) -> None:
        self.options = options
        self.detector = StepDetector(settle=max(options.warmup + 1, 6))
        self.inspector = Inspector(options.world_size)
        self.state = SessionState()
        self.patcher = Patcher()
        self.prof: Any = None
        self._opt_depth = 0
        self._started = time.monotonic()
        self._last_signal = self._started  # the latest optimizer step, batch or backward
        self._next_window: float | None = None
        self._busy = False
        self._old_alarm: Any = None

    # --- installing hooks -------------------------------------------------------------------
    def install(self) -> None:
        """Patch torch so optimizer steps, batches and backward calls reach the session."""
        import torch
        import torch.autograd.profiler as legacy
        import torch.profiler.profiler as kineto
        import torch.utils.data.dataloader as dl
        from torch.optim import Optimizer

        self.inspector.install()
        self.patcher.wrap(Optimizer, "_patch_step_function", self._wrap_patch_step)
        self.patcher.wrap(dl._BaseDataLoaderIter, "__next__", self._wrap_next)
        self.patcher.wrap(torch.autograd, "backward", self._wrap_backward)
        self.patcher.wrap(kineto._KinetoProfile, "prepare_trace", self._wrap_foreign_profiler)
        self.patcher.wrap(legacy.profile, "__enter__", self._wrap_foreign_profiler)
        self.patcher.wrap(kineto._KinetoProfile, "export_chrome_trace", self._wrap_export)
        self._arm()

    def restore(self) -> None:
        """Stop any profiling still running and undo every patch."""
        self._disarm()
        if self.state.phase == "profile":
            self._finish(partial=True)
        self.inspector.restore()
        self.patcher.restore()

    def _wrap_patch_step(self, original: Any) -> Any:
        session = self

        def _patch_step_function(opt: Any) -> None:
            original(opt)
            cls = type(opt)
            step = cls.__dict__.get("step")
            if step is not None and not getattr(step, "_torchpace", False):
                session.patcher.wrap(cls, "step", session._wrap_step)

        return _patch_step_function

    def _wrap_step(self, inner: Any) -> Any:
        session = self

        # Outside torch's own record_function("Optimizer.step#..."), so a step boundary never
        # splits that span in the trace.
        def step(opt: Any, *args: Any, **kwargs: Any) -> Any:
            session._opt_depth += 1
            try:
                out = inner(opt, *args, **kwargs)
            finally:
                session._opt_depth -= 1
            if session._opt_depth == 0:
                session._last_signal = time.monotonic()
                watcher = session.inspector.watcher
                if watcher is not None and watcher.active:
                    watcher.optimizer_steps += 1
                session._on(session.detector.optimizer_step(id(opt)))
            return out

        step._torchpace = True  # type: ignore[attr-defined]
        step.hooked = True  # type: ignore[attr-defined]  # torch must not wrap it again
        return step

    def _wrap_next(self, inner: Any) -> Any:
        session = self

        def __next__(it: Any) -> Any:
            session._last_signal = time.monotonic()
            session._on(session.detector.loader_batch())
            record = getattr(it, "_torchpace_loader", None)
            if record is None:
                return inner(it)
            # Profiled steps: timed in wall and thread CPU time (doctor/loaders.py).
            profiled = session.state.phase == "profile"
            batch = record.timed(inner, it) if profiled else inner(it)
            if record.hashed < 32 and record.wants_hashes():
                record.hash_batch(batch)
            return batch

        return __next__

    def _wrap_backward(self, inner: Any) -> Any:
        session = self

        def backward(*args: Any, **kwargs: Any) -> Any:
            out = inner(*args, **kwargs)
            session._last_signal = time.monotonic()
            watcher = session.inspector.watcher
            if watcher is not None and watcher.active:
                watcher.backward_calls += 1
            session._on(session.detector.backward_done(session._opt_depth > 0))
            return out

        return backward

    def _wrap_foreign_profiler(self, inner: Any) -> Any:
        session = self

        def start(prof: Any, *args: Any, **kwargs: Any) -> Any:
            if prof is not session.prof and getattr(prof, "profiler", None) is not session.prof:
                session._step_aside()
            return inner(prof, *args, **kwargs)

        return start

    def _wrap_export(self, inner: Any) -> Any:
        session = self

        def export_chrome_trace(prof: Any, path: str) -> Any:
            out = inner(prof, path)
            if prof is not session.prof:
                session.state.script_traces.append(str(path))
            return out

        return export_chrome_trace

    # --- step boundaries --------------------------------------------------------------------
    def _on(self, event: Event) -> None:
        if event is Event.NONE:
            return
        # The alarm handler must not run a boundary while a hook is in the middle of one.
        self._busy = True
        try:
            if event is Event.RESTART:
                self._restart()
            self._boundary()
        finally:
            self._busy = False

    def _restart(self) -> None:
        st = self.state
        if st.phase == "profile":
            self.prof.stop()  # discarded: these steps were counted with a weaker signal
            self.prof = None
        if st.phase in ("profile", "watch"):
            self.inspector.unwatch()
            self.inspector.watcher = None
        if st.phase != "aside":
            st.phase = "warmup"
        st.boundaries = 0
        st.recorded = 0
        st.restarts += 1

    def _boundary(self) -> None:
        st, opts = self.state, self.options
        st.boundaries += 1
        watcher = self.inspector.watcher
        if st.phase == "watch" and watcher is not None and watcher.active:
            watcher.step_done()
        if st.phase in ("done", "aside"):
            if st.phase == "done" and not opts.full:
                raise StopScript
            return
        watched = min(opts.watch_steps, opts.warmup)
        # Time windows end in a signal handler, possibly inside a hook: installing or removing
        # hooks there is unsafe, so window runs are not watched. Under torch.compile, global module
        # hooks would make dynamo recompile at the first profiled step: not watched either.
        unwatched = self.detector.mode == "window" or self.inspector.compiled
        if (
            st.phase == "warmup"
            and st.boundaries > opts.warmup - watched
            and watched
            and not unwatched
        ):
            st.phase = "watch"
            self.inspector.watch()
        if st.phase in ("warmup", "watch") and st.boundaries > opts.warmup:
            self.inspector.unwatch()
            self.inspector.capture_flags()
            self._start_profiler()
        elif st.phase == "profile":
            st.recorded += 1
            if st.recorded >= opts.steps:
                self._finish(partial=False)
                if not opts.full:
                    raise StopScript
            else:
                self.prof.step()

    def _start_profiler(self) -> None:
        import torch
        import torch.autograd.profiler as legacy
        from torch.profiler import ProfilerAction, ProfilerActivity, profile

        if legacy._is_profiler_enabled:
            self._step_aside()
            return
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.prof = profile(
            activities=activities,
            record_shapes=True,
            with_stack=True,  # source locations for syncs and copies
            profile_memory=self.options.profile_memory,
            # A schedule that always records: torch then marks each prof.step() as ProfilerStep#N.
            schedule=_always_record(ProfilerAction.RECORD),
        )
        self.state.phase = "profile"
        self.detector.frozen = True  # the iteration's closing optimizer no longer changes
        self.state.profile_started = time.perf_counter()
        self.prof.start()

    def _finish(self, *, partial: bool) -> None:
        st = self.state
        st.last_step_end = time.perf_counter()
        self.prof.stop()
        st.phase = "done"
        if st.recorded == 0:
            st.notes.append("profiling stopped before the first profiled step ended")
            return
        path = self.trace_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.prof.export_chrome_trace(str(path))
        if partial:
            from torchpace.doctor.tracefile import drop_unfinished_step

            if drop_unfinished_step(path, st.recorded):
                st.notes.append("the step running when the script stopped is left out (unfinished)")
        st.trace_files.append(str(path))

    def trace_path(self) -> Path:
        """Where this process's trace goes: a name TensorBoard's profiler plugin lists."""
        rank = self.options.rank if self.options.rank is not None else 0
        return self.options.out_dir / f"{socket.gethostname()}_rank{rank}.pt.trace.json"

    def _step_aside(self) -> None:
        st = self.state
        if st.phase == "aside":
            return
        where = user_location()
        if st.phase == "profile":
            self.prof.stop()  # discarded: the script's own profiler takes over
            self.prof = None
        self.inspector.unwatch()
        st.phase = "aside"
        st.notes.append(
            f"the script starts its own torch.profiler{f' at {where}' if where else ''}: "
            "torchpace stepped aside (two profilers cannot record at once), kept its live "
            "inspection, and let the script run to its end"
        )

    # --- time: windows and --max-seconds ----------------------------------------------------
    def _arm(self) -> None:
        if self.options.max_seconds is None and self.options.window_after_s <= 0:
            return
        self._old_alarm = signal.signal(signal.SIGALRM, self._on_alarm)
        signal.setitimer(signal.ITIMER_REAL, _TICK_S, _TICK_S)

    def _disarm(self) -> None:
        if self._old_alarm is not None:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            signal.signal(signal.SIGALRM, self._old_alarm)
            self._old_alarm = None

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self._busy:
            return  # a hook is mid-boundary; the next tick comes in _TICK_S
        now = time.monotonic()
        elapsed = now - self._started
        opts, det = self.options, self.detector
        if opts.max_seconds is not None and elapsed >= opts.max_seconds:
            self._disarm()
            self._time_is_up()
        # Time windows only for a script that has given no step signal at all for a while (slow
        # first steps are not a reason: they still give signals).
        if det.mode is None and now - self._last_signal < opts.window_after_s:
            return
        if det.mode not in (None, "window"):
            if opts.max_seconds is None:
                self._disarm()  # steps come from hooks now; nothing left to time
            return
        if self._next_window is None or now >= self._next_window:
            self._next_window = now + opts.window_s
            self._on(det.window_tick())

    def _time_is_up(self) -> None:
        st = self.state
        st.timed_out = True
        st.notes.append(f"stopped after --max-seconds {self.options.max_seconds:g}")
        if st.phase == "profile":
            self._finish(partial=True)
        raise StopScript


def _always_record(action: Any) -> Any:
    def schedule(step: int) -> Any:
        return action

    return schedule
