"""The session's measured window: the profiled steps, then the timed ones, and what surrounds them.

The session (runner/session.py) decides when, under its lock; this carries out runner/phases.py's
actions: it watches the live objects, starts and stops the recorder, marks the step clock, samples
the machine's load over each part (doctor/conditions.py judges it), and notes how the window ended.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchpace.cores import thread_ready_s, usable_cores
from torchpace.policy.threads import FewerThreads, contention, local_ranks
from torchpace.runner import phases
from torchpace.runner.load import LoadSample, others_cores, sample_load
from torchpace.runner.math_clock import MathClock
from torchpace.runner.options import DoctorOptions, SessionState
from torchpace.runner.profiling import StepFootprint
from torchpace.runner.recorder import Recorder
from torchpace.runner.sensors.host import device_record
from torchpace.runner.sensors.inspector import Inspector
from torchpace.runner.timing import StepClock
from torchpace.runner.watchdog import loader_sigchld_held
from torchpace.trace.stacks import SourceLocation
from torchpace.trace.stats import median


class Window:
    """The recorder, the step clock and the load samples of one session (lock held in all)."""

    def __init__(
        self,
        options: DoctorOptions,
        out_dir: Path,
        state: SessionState,
        inspector: Inspector,
        say: Callable[[str], None],
    ) -> None:
        self.options = options
        self.state = state
        self.inspector = inspector
        self.recorder = Recorder(options, out_dir, state.notes, state.trace_files)
        self.clock = StepClock()
        self.footprint = StepFootprint()  # the script's own in-step memory rise (warm-up)
        self._say = say
        self._load: LoadSample | None = None
        self._ready0: float | None = None  # the recording thread's run-queue wait at its start
        self._threads = self._fewer = 0  # the script's torch threads, and fewer, while probing
        self._eager: Any = None  # torch.compiler's stance set aside while a compiled run probes
        self._math: MathClock | None = None  # the last steps at fewer threads, their matmuls
        # The doctor's own time, counted apart in a followed run's account (runner/follow.py).
        self.own: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
        # Names what is alive when the window starts and ends (--no-memory: nothing).
        self.memory = inspector.memory if options.profile_memory else None

    def boundary(self) -> None:
        """One step ended, before the phases decide: the step clock, the watched model, the
        warm-up's in-step memory rise and torch.compile's count take it."""
        st = self.state
        if st.phase in phases.SETTLED:  # the script runs on (aside, or past its stop): no timing
            self.inspector.compiles.boundary(after_warmup=True)
            return
        self.clock.boundary(st.phase, st.boundaries)
        watcher = self.inspector.watcher
        if st.phase == "watch" and watcher is not None and watcher.active:
            watcher.step_done()
        warming = st.phase in ("warmup", "watch")
        if warming:
            self.footprint.boundary()
        self.inspector.compiles.boundary(after_warmup=not warming)

    def counts(self) -> phases.Counts:
        """Where the run stands, for runner/phases.py."""
        st, clock = self.state, self.clock
        return phases.Counts(
            st.phase, st.boundaries, st.recorded, len(clock.after_ms), len(clock.fewer_ms)
        )

    def act(
        self, action: phases.Action, *, window: bool, here: bool, dispatch: bool, alone: bool
    ) -> None:
        """Carry out one of runner/phases.py's actions, but "start_profiler" (the session's: a
        profiler the script runs sends it aside). `window`: steps are fixed time windows; `here`:
        this thread records; `dispatch`: one training thread, whose dispatches may be watched;
        `alone`: no other thread of the script reached a hook."""
        if action == "watch":
            self.state.phase = "watch"
            self.inspector.watch(dispatch=dispatch)
        elif action == "end_warmup":
            self.inspector.unwatch()
            self.inspector.capture_flags()
        elif action == "start_timing":
            self.start_timing(window=window)
        elif action == "record_step":
            self.recorder.step()
            self.end_before_bound(window=window, here=here)
        elif action == "finish":
            self.finish(partial=False, here=here)
        elif action == "timing_done":
            # torch's thread count is the process's: not changed while another thread computes
            self.timing_done(here=here and alone)
        elif action == "time_math":
            self.time_math()
        elif action == "probe_done":
            self.probe_done()

    def restart(self) -> None:
        """A stronger step signal: what the weaker one counted is dropped, the warm-up again."""
        st = self.state
        if st.phase == "profile":
            self.recorder.discard()
        if st.phase in ("profile", "watch"):
            self.inspector.unwatch()
            self.inspector.watcher = None
        if phases.restarted(st.phase):
            self.clock.restart()
            st.phase = "warmup"
            st.boundaries = 0
            st.recorded = 0
        st.restarts += 1

    def aside(self, where: SourceLocation | None) -> None:
        """The script starts its own torch.profiler at `where`: stop recording, let it run."""
        st = self.state
        if st.phase == "aside":
            return
        if st.phase == "profile":
            self.recorder.discard()  # the script's own profiler takes over
        if st.phase == "probe":
            self._restore_threads()  # and the matmuls' profiler stops: the script's starts
        self.inspector.unwatch()
        st.phase = "aside"
        st.notes.append(
            f"the script starts its own torch.profiler{f' at {where}' if where else ''}: "
            "torchpace stepped aside (two profilers cannot record at once), kept its live "
            "inspection, and let the script run to its end"
        )

    def end(self, *, partial: bool, here: bool, final: bool) -> bool:
        """Done: the window ends, written if profiling. False when only the recording thread may
        stop it (`here` false, not `final`: torch aborts the process when another thread stops
        its profiler); at the `final` end another thread's recording is abandoned."""
        st = self.state
        if not here and st.phase == "profile":
            if not final:
                return False
            st.notes.append(
                "profiling ran in another thread, which did not reach a step boundary before "
                "the script stopped: its trace is not written"
            )
            self.recorder.abandon()
        if st.phase == "profile":
            self.finish(partial=partial, here=here)
        if st.phase == "probe" and len(self.clock.fewer_ms) >= self.options.probe_steps:
            self.probe_done()  # the script ended while their matmuls were timed: what they took
        self._restore_threads()  # the script ended while steps ran at fewer threads
        if st.phase != "aside":
            st.phase = "done"
        return True

    def start_profiler(self) -> bool:
        """Start recording; False when a profiler already records (the script's own)."""
        import torch

        if torch.autograd._profiler_enabled():  # the C++ state: torch's Python flag can be stale
            return False
        with self.own():
            if self.memory is not None:
                self.memory.window_start(cuda=torch.cuda.is_available())
            self.recorder.start(cuda=torch.cuda.is_available(), script=self.footprint)
        self.state.phase = "profile"
        self.state.profile_started = time.perf_counter()
        self._load = sample_load()
        self._ready0 = thread_ready_s()
        self.clock.mark()
        return True

    def start_timing(self, *, window: bool) -> None:
        """The profiled window is over: time unprofiled steps, or be done (`window`: fixed time
        windows have no step time to compare with the profiled one)."""
        self.state.phase = phases.after_profile(self.options, window=window)
        if self.state.phase == "timed":
            self.clock.mark()  # after the trace was written: the next step starts now

    def timing_done(self, *, here: bool) -> None:
        """The timed steps are in: time some at fewer torch threads where they contended (only
        the training thread sets its own OpenMP count), else be done."""
        self.state.phase = "done"
        fewer = self._fewer_threads() if here else None
        if fewer is not None:
            import torch

            self._threads, self._fewer = torch.get_num_threads(), fewer
            torch.set_num_threads(fewer)
            if self._compiled():  # dynamo guards the count: its frames would compile again
                self._eager = torch.compiler.set_stance("force_eager")
            self.state.phase = "probe"

    def _fewer_threads(self) -> int | None:
        """The free cores, where torch's threads outnumbered them over the profiled steps of a
        CPU run that stops after its window (its later steps are no one's training: a run that
        goes on keeps its threads) on one process (ranks stop together: runner/ranks.py), and
        compiled nothing, or can run eager meanwhile (dynamo's guards hold the thread count: PyG's
        compiled GIN compiled its forward again at another, `GLOBAL_STATE changed: num_threads`,
        17.7 s)."""
        opts, st, clock = self.options, self.state, self.clock
        if opts.probe_steps <= 0 or opts.runs_to_end or opts.world_size > 1 or local_ranks() > 1:
            return None
        import torch

        if self._compiled() and not hasattr(torch.compiler, "set_stance"):  # torch < 2.6
            return None
        if st.profiled_others_cores is None or st.profiled_ready_ms is None:
            return None
        if not (clock.profiled_ms and clock.after_ms) or not self._cpu_run():
            return None
        c = contention(
            torch.get_num_threads(),
            1,
            usable_cores(),
            st.profiled_others_cores,
            st.profiled_ready_ms,
            median(clock.profiled_ms),
        )
        return c.free if c else None

    def _compiled(self) -> bool:
        return bool(self.inspector.compiled or self.inspector.compiles.compiled_any())

    def _cpu_run(self) -> bool:
        watcher = self.inspector.watcher
        return device_record(watcher.model.device_type if watcher else None).kind == "cpu"

    def time_math(self) -> None:
        """The steps timed at fewer threads are in: time the matmuls of the next ones, unless a
        profiler already records (the script's own) or the run compiled (eager here: its
        matmuls are not the compiled run's)."""
        import torch

        if self._eager is None and not torch.autograd._profiler_enabled():
            with self.own():
                self._math = MathClock(memory=self.options.profile_memory)
                self._math.start()

    def owns(self, prof: Any) -> bool:
        """Whether a profiler is the one timing the matmuls at fewer threads."""
        return self._math is not None and self._math.owns(prof)

    @property
    def timing_math(self) -> bool:
        """Whether the matmuls of these steps are timed (profiled: their loading is not the
        unprofiled steps')."""
        return self._math is not None

    def probe_done(self) -> None:
        """The steps at fewer threads are in: the script's own count back, and what they took."""
        eager = self._eager is not None
        math_ms, math_step_ms, math_waits = self._math_ms()
        threads = self._restore_threads()
        clock = self.clock
        timed = clock.fewer_ms[: self.options.probe_steps]  # the rest: their matmuls timed
        if threads and timed and clock.after_ms:
            self.state.notes.append(
                f"after the timed steps, {len(clock.fewer_ms)} ran at torch.set_num_threads("
                f"{self._fewer})"
                + (" eager (torch.compiler.set_stance('force_eager'))" if eager else "")
                + f" (other processes held the cores its {threads} threads needed)"
                + (
                    f", the last {len(clock.fewer_ms) - len(timed)} profiled for their matmuls"
                    if math_ms is not None
                    else ""
                )
                + ", then the script's count was set back"
            )
            self.state.fewer_threads = FewerThreads(
                threads=threads,
                fewer=self._fewer,
                step_ms=median(clock.after_ms),
                fewer_ms=median(timed),
                steps=len(timed),
                eager=eager,
                loading=self.inspector.loader.loading_ratio(),
                math_ms=math_ms,
                math_step_ms=math_step_ms,
                math_ready_ms=math_waits[0] if math_waits else None,
                math_waits=math_waits[1] if math_waits else 0,
            )
        self.state.phase = "done"

    def _math_ms(self) -> tuple[float | None, float, tuple[float, int] | None]:
        """The matmul/convolution time of a step profiled at fewer threads, the step's, and
        the training thread's waits for a core: ms a step, and the times it got one over those
        steps (None, 0, None: none profiled)."""
        math, self._math = self._math, None
        steps = self.clock.fewer_ms[self.options.probe_steps :]
        if math is None:
            return None, 0.0, None
        if not steps:
            math.abandon()
            return None, 0.0, None
        with self.own():
            math_ms, waits = math.stop()
        n = len(steps)
        return math_ms / n, sum(steps) / n, None if waits is None else (waits[0] / n, waits[1])

    def _restore_threads(self) -> int:
        """Give the script its torch thread count back; the count (0: none was changed)."""
        math, self._math = self._math, None
        if math is not None:  # the script ended while its matmuls were timed
            math.abandon()
        threads, self._threads = self._threads, 0
        eager, self._eager = self._eager, None
        if eager is not None:
            eager.__exit__(None, None, None)  # the stance the script had
        if threads:
            import torch

            torch.set_num_threads(threads)
        return threads

    def end_before_bound(self, *, window: bool, here: bool) -> None:
        """End the window here, with whole steps, when one more step would pass a bound."""
        bound = self.recorder.next_step_over_bound()
        if bound is not None:
            self.finish(partial=False, cut=self.recorder.describe_bound(bound), here=here)
            self.start_timing(window=window)

    def cut_at_bound(self, *, window: bool, here: bool) -> bool:
        """End the window mid-step where it passed a bound (the watchdog saw it); whether it did."""
        bound = self.recorder.over_bound() if self.state.phase == "profile" else None
        if bound is None:
            return False
        self.finish(partial=True, cut=self.recorder.describe_bound(bound), here=here)
        self.start_timing(window=window)
        return True

    def finish(self, *, partial: bool, here: bool, cut: str = "") -> None:
        """Stop the profiler and write its trace (never raises), with torch's SIGCHLD handler
        for DataLoader workers held off meanwhile (watchdog.loader_sigchld_held). `here`: this
        thread recorded (its run-queue wait is the window's)."""
        with loader_sigchld_held(), self.own():
            self._stop_and_write(partial=partial, cut=cut, here=here)

    # complex: the stop sequence, whose order is the point (the load is read before the profiler
    # stops).
    def _stop_and_write(self, *, partial: bool, cut: str, here: bool) -> None:
        st = self.state
        st.last_step_end = time.perf_counter()
        st.phase = "done"
        # The load over the steps, read before the profiler's stop: converting its events takes
        # hundreds of ms, and a busy machine's run-queue wait meanwhile once read 2.09x the
        # profiled 2 ms steps of a DDP tutorial (cpu-contention then withheld as implausible).
        end_load = sample_load() if self._load is not None else None
        ready = thread_ready_s() if here else None
        window = self.recorder.stop()
        if window is None:
            return
        if self.memory is not None and st.recorded:
            import torch

            # Cut mid-step (partial), what is alive includes that step's activations: no growth.
            self.memory.window_end(
                cuda=torch.cuda.is_available(), steps=0 if partial else st.recorded
            )
        if self._load is not None and end_load is not None:
            st.profiled_others_cores = others_cores(self._load, end_load)
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
