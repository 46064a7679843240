"""Run a script or module in-process, exactly as `python SCRIPT ARGS...` would, under the doctor.

Same sys.argv, `__main__`, sys.path[0], working directory and environment; the doctor's session
(doctor/session.py) finds steps, inspects live objects and profiles. Whatever way the script ends
(finishing, stopped by the doctor, raising, sys.exit, Ctrl-C), the result keeps what was captured.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from torchpace.doctor.live import Inspection
from torchpace.doctor.patching import is_library
from torchpace.doctor.session import DoctorOptions, Session, StopScript
from torchpace.errors import UsageError

__all__ = ["DoctorOptions", "RunResult", "Target", "run_target"]


@dataclass(frozen=True)
class Target:
    """What to run: a script path or a module name (`-m`), and its arguments."""

    name: str
    args: tuple[str, ...] = ()
    module: bool = False

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


def _user_traceback(exc: BaseException) -> str:
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and is_library(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next  # drop runpy and torchpace frames: the user sees their own code first
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _exec(target: Target) -> None:
    if target.module:
        sys.argv = [target.name, *target.args]  # runpy puts the module's file in argv[0]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(target.name, run_name="__main__", alter_sys=True)
    else:
        script = os.path.abspath(target.name)
        sys.argv = [target.name, *target.args]
        sys.path.insert(0, os.path.dirname(script))
        runpy.run_path(script, run_name="__main__")


def _exit_code(exc: SystemExit) -> tuple[int, str]:
    code = exc.code
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code, ""
    return 1, str(code)  # sys.exit("message") prints the message and exits 1


def run_target(target: Target, options: DoctorOptions) -> RunResult:
    """Run the target under the doctor and return what was captured."""
    target.validate()
    session = Session(options)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    exit_code, error, stopped = 0, "", False
    session.install()
    try:
        _exec(target)
    except StopScript:
        stopped = True
    except SystemExit as exc:
        exit_code, error = _exit_code(exc)
    except KeyboardInterrupt as exc:
        exit_code, error = 130, _user_traceback(exc)
    except BaseException as exc:  # the script's own error: report what was captured, then show it
        exit_code, error = 1, _user_traceback(exc)
    finally:
        session.restore()
        sys.argv[:], sys.path[:] = saved_argv, saved_path
    return _result(session, exit_code, error, stopped)


def _result(session: Session, exit_code: int, error: str, stopped: bool) -> RunResult:
    st, det = session.state, session.detector
    notes = list(st.notes)
    if st.restarts:
        notes.append(f"step counting restarted {st.restarts}x as a stronger step signal appeared")
    traces = st.trace_files
    if st.phase == "aside" and st.script_traces:
        traces = st.script_traces
        notes.append("the report analyses the trace the script's own profiler wrote")
    profiled_ms = None
    if st.profile_started is not None and st.last_step_end is not None:
        profiled_ms = (st.last_step_end - st.profile_started) * 1000.0
    inspection = session.inspector.snapshot(profiled_ms=profiled_ms, steps=st.recorded)
    return RunResult(
        trace_files=tuple(traces),
        steps_recorded=st.recorded,
        step_source=det.mode,
        step_note=det.describe(),
        inspection=inspection,
        exit_code=exit_code,
        error=error,
        stopped_early=stopped and not st.timed_out,
        timed_out=st.timed_out,
        aside=st.phase == "aside",
        notes=tuple(notes),
        last_step_end=st.last_step_end,
    )


def default_out_dir() -> Path:
    """./torchpace-out/<UTC time>/, the default for --out."""
    return Path("torchpace-out") / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
