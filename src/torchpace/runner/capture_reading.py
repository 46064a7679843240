"""What a slow-step capture (runner/slow_steps.py) shows: where its slow step's extra time went.

The capture holds a few steps under torch.profiler, read back with the trace layer. The slow step
is set against the others in the capture (their median phases, trace/breakdown.py): the phase its
extra time went to names the cause, unless torch.compile compiled inside it (its own timing
ranges, `compile_id=`) or collectives took most of the extra (another rank was slower).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchpace.runner.sensors.whole_run import SlowStep
    from torchpace.trace.model import Trace
    from torchpace.trace.summary import StepBreakdown

PHASE_CAUSE = {
    "dataloader": "waiting for the next batch (the loader)",
    "sync": "the host waited for the device (a sync)",
    "h2d": "host-to-device copies",
    "forward": "a slower forward",
    "backward": "a slower backward",
    "optimizer": "a slower optimizer step",
    "other": "Python between torch ops (the script's own code: logging, I/O)",
}


def read_captures(
    slow: list[SlowStep], captures: list[tuple[int, int, str]]
) -> tuple[list[SlowStep], list[str]]:
    """The slow steps with their causes read from the captures, and notes on captures that saw
    no slow step or could not be read."""
    from torchpace.trace.load import load_trace

    notes: list[str] = []
    by_step = {s.step: s for s in slow}
    for first, last, path in captures:
        inside = [s for s in slow if first <= s.step <= last]
        if not inside:
            notes.append(f"the capture of steps {first}-{last} saw no slow step ({path})")
            continue
        try:
            trace = load_trace(path)
        except Exception as exc:  # a capture cut short: said, not guessed at
            notes.append(f"the capture of steps {first}-{last} could not be read ({exc})")
            continue
        steps = list(trace.breakdown.steps)
        for s in inside:
            at = s.step - first
            if at < len(steps):
                by_step[s.step] = _read(trace, steps, at, s, path)
    return [by_step[s.step] for s in slow], notes


def _read(trace: Trace, steps: list[StepBreakdown], at: int, slow: SlowStep, path: str) -> SlowStep:
    from torchpace.trace.stats import median

    step = steps[at]
    others = [o for i, o in enumerate(steps) if i != at]
    base_ms = median(o.duration_ms for o in others) if others else slow.median_ms
    extra = {
        p.value: ms - (median(o.phase_ms[p] for o in others) if others else 0.0)
        for p, ms in step.phase_ms.items()
    }
    phase = max(extra, key=extra.__getitem__)
    excess = max(step.duration_ms - base_ms, 1e-9)
    compile_ms, comm_ms = _compile_and_comm_ms(trace, step)
    if compile_ms >= 0.3 * excess:
        cause = "torch.compile compiled again (a recompile)"
    elif comm_ms >= 0.5 * excess:
        cause = "collectives waited (another rank was slower: a straggler)"
    else:
        cause = PHASE_CAUSE.get(phase, phase)
    evidence = (
        f"profiled: {step.duration_ms:.0f} ms against {base_ms:.0f} ms for the captured steps "
        f"around it; extra time in {phase} {extra[phase]:+.0f} ms"
        + (f"; compiling {compile_ms:.0f} ms" if compile_ms else "")
        + (f"; collectives {comm_ms:.0f} ms" if comm_ms else "")
    )
    return replace(slow, cause=cause, evidence=evidence, trace=path)


def _compile_and_comm_ms(trace: Trace, step: StepBreakdown) -> tuple[float, float]:
    """torch.compile's longest timing range, and the union of collectives on the training
    thread, inside the step (ms)."""
    from torchpace.trace import intervals as iv
    from torchpace.trace.labels import DYNAMO_TIMED
    from torchpace.trace.names import COMMUNICATION_OP

    lo, hi = step.start_us, step.start_us + step.duration_ms * 1000.0
    ops = [o for o in trace.host_ops if lo <= o.ts_us < hi]
    compiling = max((o.dur_us for o in ops if DYNAMO_TIMED in o.name), default=0.0)
    comm = iv.union(
        (o.ts_us, o.ts_us + o.dur_us)
        for o in ops
        if o.tid == trace.main_tid and COMMUNICATION_OP.match(o.name)
    )
    return compiling / 1000.0, iv.total(comm) / 1000.0
