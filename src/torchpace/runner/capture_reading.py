"""What a slow-step capture (runner/slow_steps.py) shows: where its slow step's extra time went.

The capture holds a few steps under torch.profiler, read back with the trace layer. The slow step
is set against the others in the capture (their median phases, trace/breakdown.py): the phase its
extra time went to names the cause, unless torch.compile compiled inside it (its own timing
ranges, `(dynamo_timed)`; the guard that failed is dynamo's own record for the compile id the
ranges name: runner/sensors/compile.py) or collectives took most of the extra (another rank was
slower: a rank slow only sometimes makes the others wait in their next collective).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.runner.slow_steps import UNEXPLAINED

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
RECOMPILE = "torch.compile compiled again (a recompile)"
COMPILE = "torch.compile compiled inside it"
STRAGGLER = "collectives waited (another rank was slower: a straggler)"
NOT_SLOWER = "no slower than the captured steps around it (the machine's load, not the step)"
# No phase took half the extra: the whole step ran slower. ignite's CIFAR-10 epoch start, captured:
# 649 ms against 132 ms, its extra in the optimizer +194 ms, forward +95, other +79, the loader
# +76, backward +73 (read as "a slower optimizer step": its workers were starting beside it).
SPREAD = (
    "every phase slower, none by half the extra (the host's other work: other processes, "
    "loader workers starting, page faults)"
)
_COMPILE_ID = re.compile(r"compile_id=\[?(\d+/\d+)")


def read_captures(
    slow: list[SlowStep], captures: list[tuple[int, int, str]], guards: dict[str, str]
) -> tuple[list[SlowStep], list[str]]:
    """The slow steps with their causes read from the captures, and notes on captures that saw
    no slow step or could not be read. `guards`: the failed guard of each recompile by compile
    id (runner/sensors/compile.py: recompile_guards)."""
    from torchpace.trace.load import load_trace

    notes: list[str] = []
    by_step = {s.step: s for s in slow}
    for first, last, path in captures:
        # A slow step its activities explained keeps that cause: ignite's CIFAR-10 example had
        # its third evaluation pass inside a capture, read as "Python between torch ops".
        inside = [s for s in slow if first <= s.step <= last and s.cause == UNEXPLAINED]
        if not inside:
            notes.append(f"the capture of steps {first}-{last} saw no slow step ({path})")
            continue
        try:
            trace = load_trace(path)
        except Exception as exc:  # a capture cut short: said, not guessed at
            notes.append(f"the capture of steps {first}-{last} could not be read ({exc})")
            continue
        steps = list(trace.breakdown.steps)
        if len(steps) < last - first + 1:
            notes.append(
                f"the capture of steps {first}-{last} holds {len(steps)} of them ({path}): its "
                "slow steps are not read"
            )
            continue
        for s in inside:
            by_step[s.step] = _read(trace, steps, s.step - first, s, path, guards)
    return [by_step[s.step] for s in slow], notes


# complex: a slow step's cause, tried in order, and its evidence from the same figures.
def _read(
    trace: Trace,
    steps: list[StepBreakdown],
    at: int,
    slow: SlowStep,
    path: str,
    guards: dict[str, str],
) -> SlowStep:
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
    compile_ms, ids = _compile_ms(trace, step)
    comm_ms = _comm_ms(trace, step) - (
        median(_comm_ms(trace, o) for o in others) if others else 0.0
    )
    failed = [f"{guards[i]} (compile {i})" for i in ids if i in guards]
    if step.duration_ms <= base_ms:
        cause = NOT_SLOWER
    elif compile_ms >= 0.3 * excess:
        cause = f"{RECOMPILE}: {failed[0]}" if failed else COMPILE
    elif comm_ms >= 0.5 * excess:
        cause = STRAGGLER
    elif extra[phase] < 0.5 * excess:
        cause = SPREAD
    else:
        cause = PHASE_CAUSE.get(phase, phase)
    top = sorted(extra, key=extra.__getitem__, reverse=True)[: 3 if cause == SPREAD else 1]
    evidence = (
        f"profiled: {step.duration_ms:.0f} ms against {base_ms:.0f} ms for the captured steps "
        f"around it; extra time in "
        + ", ".join(f"{p} {extra[p]:+.0f} ms" for p in top)
        + (f"; compiling {compile_ms:.0f} ms" if compile_ms else "")
        + (f"; collectives {comm_ms:+.0f} ms" if comm_ms >= 0.5 else "")
    )
    return replace(slow, cause=cause, evidence=evidence, trace=path)


def _window(step: StepBreakdown) -> tuple[float, float]:
    return step.start_us, step.start_us + step.duration_ms * 1000.0


def _compile_ms(trace: Trace, step: StepBreakdown) -> tuple[float, list[str]]:
    """torch.compile's timing ranges inside the step (their union, ms), and the compile ids they
    name."""
    from torchpace.trace import intervals as iv
    from torchpace.trace.labels import DYNAMO_TIMED, DYNAMO_TIMED_OP

    lo, hi = _window(step)
    timed = [
        o
        for o in trace.host_ops
        if lo <= o.ts_us < hi and (DYNAMO_TIMED in o.name or o.name.endswith(DYNAMO_TIMED_OP))
    ]
    compiling = iv.union((o.ts_us, o.ts_us + o.dur_us) for o in timed)
    ids = dict.fromkeys(m[1] for o in timed if (m := _COMPILE_ID.search(o.name)))
    return iv.total(compiling) / 1000.0, list(ids)


def _comm_ms(trace: Trace, step: StepBreakdown) -> float:
    """Time inside the step with a collective under way (ms): host ranges on any thread (gloo
    runs them on its own threads, and the training thread's wait for them is no op) and
    communication kernels."""
    from torchpace.trace import intervals as iv
    from torchpace.trace.names import COMMUNICATION_KERNEL, COMMUNICATION_OP

    host = [(o.ts_us, o.ts_us + o.dur_us) for o in trace.host_ops if COMMUNICATION_OP.match(o.name)]
    device = [
        (k.ts_us, k.ts_us + k.dur_us) for k in trace.kernels if COMMUNICATION_KERNEL.search(k.name)
    ]
    return iv.total(iv.union(iv.clip(host + device, *_window(step)))) / 1000.0
