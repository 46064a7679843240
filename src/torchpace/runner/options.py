"""What a doctor session is given and what it keeps: options, counted state, the stop signals."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from torchpace.policy.threads import FewerThreads
from torchpace.policy.window import check_window
from torchpace.runner.profiling import ProfileBounds

Phase = Literal["warmup", "watch", "profile", "timed", "probe", "done", "aside"]


class StopScript(BaseException):
    """Raised inside the script at a step boundary once the doctor has what it needs.

    A BaseException, so the script's `except Exception` blocks let it through. It says what it
    is: frameworks log the exception that ends their loop (ignite printed "Engine run is
    terminating due to exception: " with nothing after it)."""

    def __str__(self) -> str:
        return "torchpace doctor stopped the script here; its report follows"


class Terminated(StopScript):
    """SIGTERM arrived (timeout, Slurm, Kubernetes, CI): stop and report, as for Ctrl-C."""

    def __str__(self) -> str:
        return "torchpace doctor stopped the script: SIGTERM"


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
    # No signal at all (step, batch, backward) this long after the script's last import, once an
    # nn.Module has run: time windows (an import-heavy start, 10-20 s on a busy machine, or data
    # tokenised for minutes before training are not what windows are for).
    window_after_s: float = 10.0
    window_s: float = 0.5
    rank: int | None = None
    world_size: int = 1
    timed_steps: int = 3  # unprofiled steps timed after the profiled ones (the profiler's cost)
    profile: bool = True  # False: no trace, only `timed_steps` timed after the warm-up
    # Steps timed at torch threads fitted to the free cores, after the timed ones, where other
    # processes' load held the cores the script's threads needed (runner/window.py).
    probe_steps: int = 3
    bounds: ProfileBounds = field(default_factory=ProfileBounds)
    # --follow: the script runs on after the window, under a light watch of the whole run
    # (runner/follow.py), to its end, --max-seconds, or the end of `epochs` training epochs.
    follow: bool = False
    epochs: int | None = None

    def __post_init__(self) -> None:
        check_window(self.warmup, self.steps)

    @property
    def runs_to_end(self) -> bool:
        """Whether the script runs on after its window (--full, --follow)."""
        return self.full or self.follow


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
    profiled_ready_ms: float | None = None  # run-queue wait per profiled step (training thread)
    fewer_threads: FewerThreads | None = None  # the steps timed at fewer torch threads
    epochs_reached: bool = False  # --follow --epochs N: stopped after the Nth epoch
