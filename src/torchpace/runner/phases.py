"""The session's phases, decided with no thread, clock or torch: what a step boundary leads to.

warmup -> watch (the last warm-up steps: live objects watched) -> profile -> timed (unprofiled steps:
what the profiler itself costs) -> probe (steps at fewer torch threads, where other processes held
the cores; the last MATH_STEPS of them time their matmuls) -> done; `aside` once the script starts
its own profiler. The session (runner/session.py) counts steps and carries out the actions named
here, in their order, each moving the phase as its comment says (an action may end elsewhere: a
profiler the script already runs sends the session aside, a bound ends the profiled window early).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torchpace.runner.options import DoctorOptions, Phase

# Steps at fewer torch threads whose matmuls are timed, after the `probe_steps` timed there.
MATH_STEPS = 2

Action = Literal[
    "watch",  # -> watch: live objects watched (the last warm-up steps)
    "end_warmup",  # stop watching, read the flags the script set
    "start_profiler",  # -> profile
    "start_timing",  # -> timed, or done (after_profile)
    "record_step",  # one more profiled step: the recorder's step, then its bounds
    "finish",  # -> done: stop the profiler and write the trace
    "timing_done",  # -> probe, or done: the timed steps are in (the other processes' load over them)
    "time_math",  # the timed steps at fewer threads are in: time the math of MATH_STEPS more
    "probe_done",  # -> done: the steps at fewer threads are in, the script's count restored
]


@dataclass(frozen=True)
class Counts:
    """Where the run stands just after a boundary was counted."""

    phase: Phase
    boundaries: int  # boundaries since the step signal settled, this one included
    recorded: int  # profiled steps completed before this boundary
    timed: int  # unprofiled steps timed so far
    probed: int = 0  # steps timed at fewer torch threads so far


SETTLED: tuple[Phase, ...] = ("done", "aside")  # no action follows a boundary in these phases


def at_boundary(
    now: Counts, opts: DoctorOptions, *, watchable: bool
) -> tuple[int, tuple[Action, ...]]:
    """The profiled steps completed after this boundary, and what to do now, in order.

    `watchable`: live objects may be watched (not under time windows, which end in a signal
    handler where installing hooks is unsafe, nor under torch.compile: see Inspector.compiled)."""
    if now.phase == "timed":
        return now.recorded, ("timing_done",) if now.timed >= opts.timed_steps else ()
    if now.phase == "probe":
        if now.probed == opts.probe_steps:
            return now.recorded, ("time_math",)
        return now.recorded, ("probe_done",) if now.probed >= opts.probe_steps + MATH_STEPS else ()
    if now.phase == "profile":
        recorded = now.recorded + 1
        return recorded, ("finish", "start_timing") if recorded >= opts.steps else ("record_step",)
    if now.phase not in ("warmup", "watch"):
        return now.recorded, ()
    watched = min(opts.watch_steps, opts.warmup)
    starts = now.phase == "warmup" and now.boundaries > opts.warmup - watched and watched
    actions: tuple[Action, ...] = ("watch",) if starts and watchable else ()
    if now.boundaries > opts.warmup:
        actions += ("end_warmup", "start_profiler" if opts.profile else "start_timing")
    return now.recorded, actions


def after_profile(opts: DoctorOptions, *, window: bool) -> Phase:
    """The phase once the profiled window ends: timed steps, or done without any to time."""
    return "done" if opts.timed_steps <= 0 or window else "timed"


def restarted(phase: Phase) -> bool:
    """Whether a stronger step signal sends this phase back to the warm-up (counted again)."""
    return phase not in ("aside", "timed", "probe", "done")


def progress(now: Counts, opts: DoctorOptions) -> str:
    """The progress line after a boundary."""
    if now.phase in ("warmup", "watch"):
        watching = ", watching the model" if now.phase == "watch" else ""
        return f"warm-up {now.boundaries}/{opts.warmup} steps{watching}"
    if now.phase == "profile":
        return f"profiling {now.recorded}/{opts.steps} steps"
    if now.phase == "timed":
        return f"timing steps without the profiler {now.timed}/{opts.timed_steps}"
    if now.phase == "probe":
        return (
            "timing steps at fewer torch threads (a busy machine) "
            f"{now.probed}/{opts.probe_steps + MATH_STEPS}"
        )
    if now.phase == "done":
        if opts.follow:
            return "profiled: following the run to its end (--follow)"
        return "profiled: the script runs to its end (--full)" if opts.full else "done"
    return ""
