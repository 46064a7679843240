"""Run a script or module in-process, exactly as `python SCRIPT ARGS...` would, under the doctor.

Same sys.argv, `__main__`, sys.path[0], working directory and environment; the doctor's session
(runner/session.py) finds steps, inspects live objects and profiles. Whatever way the script ends
(finishing, stopped by the doctor, raising, sys.exit, Ctrl-C, SIGTERM, os._exit, a fork, a
deleted or changed working directory), the result keeps what was captured.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import runpy
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType

from torchpace.errors import UsageError
from torchpace.runner.conditions import RunConditions, profiler_cost
from torchpace.runner.load import load_average, release_freed_memory
from torchpace.runner.options import DoctorOptions, StopScript, Terminated
from torchpace.runner.patching import is_library, mark_user_file
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.memory import address_limit, lift_address_limit
from torchpace.runner.sensors.whole_run import RAN_TO_END, WholeRun
from torchpace.runner.session import Session
from torchpace.runner.watchdog import drop_loader_sigchld, restore_loader_sigchld
from torchpace.trace.stats import median

__all__ = ["DoctorOptions", "RunHooks", "RunResult", "Target", "run_target"]

_TORCHPACE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@dataclass(frozen=True)
class Target:
    """What to run: a script path or a module name (`-m`), and its arguments."""

    name: str
    args: tuple[str, ...] = ()
    module: bool = False
    # What runs in the script's place: its function, in a process it spawned (runner/spawned.py).
    call: Callable[[], None] | None = field(default=None, compare=False)

    def validate(self) -> None:
        """UsageError naming the script or module when it cannot be run."""
        if self.module:
            sys.path.insert(0, os.getcwd())  # as `python -m` does
            try:
                spec = importlib.util.find_spec(self.name)
            except (ImportError, ValueError):
                spec = None
            finally:
                sys.path.pop(0)
            if spec is None:
                raise UsageError(
                    f"no module named {self.name!r}; check the name and that its package is "
                    "importable from this directory (as `python -m` would need)"
                )
        elif not Path(self.name).is_file():
            raise UsageError(
                f"script {self.name!r} not found; give the path of a Python file, "
                "e.g. torchpace doctor train.py --epochs 1"
            )


@dataclass(frozen=True)
class RunHooks:
    """What the caller hears while a script runs (the CLI's progress line and report)."""

    # What the doctor is doing now: "warming up", "profiling", "writing the trace", ...
    stage: Callable[[str], None] | None = None
    # The process is about to end on the script's behalf (os._exit, or a script that ignores
    # --max-seconds): report this result now and end the process (os._exit): the script's own
    # threads or handlers would keep it alive.
    give_up: Callable[[RunResult], None] | None = None


@dataclass(frozen=True)
class RunResult:
    """How the run went and what it left: traces, live facts, the script's exit."""

    trace_files: tuple[str, ...]
    steps_recorded: int
    step_source: str | None  # "optimizer", "dataloader", "backward", "window"; None: no steps
    step_note: str  # how steps were found, one sentence
    inspection: Inspection
    exit_code: int  # what `python SCRIPT` would have exited with (0 when the doctor stopped it)
    error: str = ""  # the script's traceback, "" when it raised nothing
    stopped_early: bool = False  # the doctor stopped the script after its profiled steps
    timed_out: bool = False
    aside: bool = False  # the script ran its own profiler; the doctor recorded none
    notes: tuple[str, ...] = field(default_factory=tuple)
    last_step_end: float | None = None  # time.perf_counter() when the last profiled step ended
    terminated: bool = False  # stopped by SIGTERM
    child: bool = False  # a forked copy of the doctored process: the parent reports
    conditions: RunConditions | None = None  # machine load and the profiler's own cost
    unprofiled_ms: tuple[float, ...] = ()  # steps timed without the profiler, in order
    profiled_ms: tuple[float, ...] = ()  # each profiled step's wall time
    threads_left: tuple[str, ...] = ()  # the script's threads still running after it stopped
    torch_version: str | None = None  # the torch the script ran with (traces rarely say)
    rank: int | None = None  # its rank in a multi-rank run (torchrun's RANK); None: one process
    spawned: bool = False  # run in a process the script started (runner/spawned.py)
    # Why this process waits for none the script started beside it (Hogwild); "" when unknown
    apart: str = ""


def _ours(filename: str) -> bool:
    return filename.startswith(_TORCHPACE) or filename.startswith("<frozen runpy>")


def _drop_frames(te: traceback.TracebackException) -> None:
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if not _ours(f.filename)])
    for chained in (te.__cause__, te.__context__):
        if chained is not None:
            _drop_frames(chained)


def _user_traceback(exc: BaseException) -> str:
    """The script's traceback without the doctor's frames (runpy's and torchpace's hooks).

    A signal handler may raise while it is formatted: torch's SIGCHLD handler raises "DataLoader
    worker ... is killed" again each time another worker exits after one failed. That exception
    (chained to the first) is then the one shown, never a torchpace traceback."""
    for _ in range(3):
        try:
            return _format_user(exc)
        except Exception as late:
            exc = late
    return f"{type(exc).__name__}: {exc}\n"


def _format_user(exc: BaseException) -> str:
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and is_library(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next  # the user sees their own code first
    te = traceback.TracebackException(type(exc), exc, tb)
    _drop_frames(te)
    return "".join(te.format())


def _exec(target: Target) -> None:
    if target.call is not None:
        target.call()
    elif target.module:
        sys.argv = [target.name, *target.args]  # runpy puts the module's file in argv[0]
        sys.path.insert(0, os.getcwd())
        _mark_module_file(target.name)
        runpy.run_module(target.name, run_name="__main__", alter_sys=True)
    else:
        script = os.path.abspath(target.name)
        sys.argv = [target.name, *target.args]
        sys.path.insert(0, os.path.dirname(script))
        runpy.run_path(script, run_name="__main__")


def _mark_module_file(name: str) -> None:
    """The module `-m` runs is the user's code even when installed (`-m trl.scripts.sft` lives in
    site-packages): its lines, not the launcher's, are where findings point."""
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(f"{name}.__main__")  # a package runs its __main__
        if spec is not None and spec.origin:
            mark_user_file(spec.origin)


def _exit_code(exc: SystemExit) -> tuple[int, str]:
    code = exc.code
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code, ""
    return 1, str(code)  # sys.exit("message") prints the message and exits 1


# complex: every way the script can end, in one try, and the restore order in its finally.
def run_target(target: Target, options: DoctorOptions, hooks: RunHooks | None = None) -> RunResult:
    """Run the target under the doctor and return what was captured."""
    target.validate()
    hooks = hooks or RunHooks()
    session = Session(options)
    session.stage = hooks.stage
    if hooks.give_up is not None:
        give_up = hooks.give_up
        session.on_give_up = lambda status: give_up(_result(session, status, "", False))
    saved_argv, saved_path, cwd = sys.argv[:], sys.path[:], os.getcwd()
    exit_code, error, stopped, dropped = 0, "", False, None
    limit = address_limit()
    session.install()
    try:
        session.watchdog.in_script = True
        _exec(target)
    except Terminated:
        exit_code = 128 + signal.SIGTERM
    except StopScript:
        stopped = True
    except SystemExit as exc:
        exit_code, error = _exit_code(exc)
    except KeyboardInterrupt as exc:
        dropped = drop_loader_sigchld()
        exit_code, error = 130, _user_traceback(exc)
    except BaseException as exc:  # the script's own error: report what was captured, then show it
        dropped = drop_loader_sigchld()
        if session.state.terminated:  # e.g. its DataLoader workers, ended by the same SIGTERM
            exit_code = 128 + signal.SIGTERM
            session.state.notes.append(
                f"after SIGTERM the script ended with {type(exc).__name__}: {exc}".strip()
            )
        else:
            session.inspector.memory.on_error(exc)  # an out-of-memory: what was held, and where
            exit_code, error = 1, _user_traceback(exc)
    finally:
        try:
            session.watchdog.leave_script()
        except StopScript:  # raised asynchronously before the script's end was marked
            session.watchdog.leave_script()
        if session.state.child:
            _end_forked_child(exit_code)
        left = session.wait_for_threads(5.0) if not session.inert else []
        if not left and not session.inert:
            session.inspector.release_workers()  # before the collector frees the namespace
        session.restore()
        if lifted := lift_address_limit(limit):
            session.state.notes.append(lifted)
        _close_account(session, exit_code)  # the script's end: before the doctor's clean-up
        sys.argv[:], sys.path[:] = saved_argv, saved_path
        with contextlib.suppress(OSError):
            os.chdir(cwd)  # the report's relative paths are the user's, not the script's
    if stopped or session.state.timed_out or session.state.terminated:
        _disarm_timers()
    gc.collect()  # the script's module globals hold cycles: free them before the analysis
    release_freed_memory()
    restore_loader_sigchld(dropped)
    return _result(session, exit_code, error, stopped, tuple(left))


def _disarm_timers() -> None:
    """The doctor stopped the script: its alarms (signal.alarm, setitimer) die with it, as
    they would with its process, instead of killing the report."""
    for timer in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF"):
        if hasattr(signal, timer):
            signal.setitimer(getattr(signal, timer), 0, 0)


def _end_forked_child(status: int) -> None:
    """A forked copy of the script reached its end: it ends here, as forked children should
    (os._exit). The parent reports; tearing down the parent's profiler state in the child
    spins forever in torch 2.13."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)


def _result(
    session: Session, exit_code: int, error: str, stopped: bool, left: tuple[str, ...] = ()
) -> RunResult:
    st, det = session.state, session.detector
    notes = list(st.notes)
    if st.restarts:
        notes.append(f"step counting restarted {st.restarts}x as a stronger step signal appeared")
    traces = st.trace_files
    if st.phase == "aside" and st.script_traces:
        traces, note = _script_trace(st.script_traces)
        notes.append(note)
    if left:
        notes.append(f"the script's threads {', '.join(left)} were still running when it stopped")
    profiled_ms = None
    if st.profile_started is not None and st.last_step_end is not None:
        profiled_ms = (st.last_step_end - st.profile_started) * 1000.0
    inspection = session.inspector.snapshot(profiled_ms=profiled_ms, steps=st.recorded)
    inspection = replace(
        inspection,
        host=replace(
            inspection.host,
            others_cores=st.profiled_others_cores,
            ready_ms_per_step=st.profiled_ready_ms,
            fewer_threads=st.fewer_threads,
        ),
        child_processes=session.processes.facts(),
        whole_run=_close_account(session, exit_code),
        ran_to_end=not (stopped or st.timed_out or st.terminated),
        typical_step_ms=median(profiled)
        if (profiled := session.window.clock.profiled_ms)
        else None,
    )
    return RunResult(
        trace_files=tuple(traces),
        steps_recorded=st.recorded,
        step_source=det.mode,
        step_note=det.describe(),
        inspection=inspection,
        exit_code=st.exit_status if st.exit_status is not None else exit_code,
        error=error,
        stopped_early=stopped and not st.timed_out and not st.epochs_reached,
        timed_out=st.timed_out,
        aside=st.phase == "aside",
        notes=tuple(notes),
        last_step_end=st.last_step_end,
        terminated=st.terminated,
        child=st.child,
        conditions=_conditions(session, inspection),
        unprofiled_ms=tuple(session.window.clock.unprofiled_ms),
        profiled_ms=tuple(session.window.clock.profiled_ms),
        threads_left=left,
        torch_version=_torch_version(),
        rank=session.options.rank,
    )


def _close_account(session: Session, exit_code: int) -> WholeRun | None:
    """A followed run's whole-run record, its account closed at the first call (the script's
    end, or the moment the doctor gives up on it)."""
    follow = session.follow
    if follow is None or session.state.child:
        return None
    return follow.facts(_ended(session, exit_code))


def _ended(session: Session, exit_code: int) -> str:
    st, opts = session.state, session.options
    if st.epochs_reached:
        return f"stopped after epoch {opts.epochs} (--epochs)"
    if st.timed_out:
        return f"stopped at --max-seconds {opts.max_seconds:g}"
    if st.terminated:
        return "stopped by SIGTERM"
    if st.exit_status is not None or exit_code:
        code = st.exit_status if st.exit_status is not None else exit_code
        return f"the script exited with status {code}"
    return RAN_TO_END


def _torch_version() -> str | None:
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", None)
    return str(version) if version is not None else None


def _script_trace(paths: list[str]) -> tuple[list[str], str]:
    """The trace to analyse among those the script's own profiler wrote (one process: one)."""
    unique = list(dict.fromkeys(paths))
    note = "the report analyses the trace the script's own profiler wrote"
    if len(paths) > 1:
        note += (
            f" (it exported {len(paths)} times, {len(unique)} file(s); the last one is "
            f"analysed: {unique[-1]})"
        )
    return [unique[-1]], note


def _conditions(session: Session, inspection: Inspection) -> RunConditions | None:
    st, clock = session.state, session.window.clock
    if not st.trace_files:
        return None
    unprofiled = clock.unprofiled_ms
    profiled_ms, unprofiled_ms, why = profiler_cost(clock.profiled_ms, unprofiled)
    if session.detector.mode == "window":
        why = "steps are fixed time windows, the same length profiled or not"
    return RunConditions(
        usable_cores=inspection.host.cores,
        others_cores=st.profiled_others_cores,
        load_average=load_average(),
        profiled_step_ms=profiled_ms,
        unprofiled_step_ms=unprofiled_ms,
        unprofiled_steps=len(unprofiled),
        cost_unmeasured=why,
        ready_ms_per_step=st.profiled_ready_ms,
    )


def default_out_dir() -> Path:
    """./torchpace-out/<UTC time>/, the default for --out."""
    return Path("torchpace-out") / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
