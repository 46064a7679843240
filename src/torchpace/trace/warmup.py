"""Which leading steps are warm-up or one-off phases rather than the steady state rules judge.

The first iterations of a run pay once for things later ones reuse: the CUDA context, streams and
events; cuDNN autotuning (`torch.backends.cudnn.benchmark`: cuDNN times candidate algorithms with
CUDA events, one `cudaEventElapsedTime` each); the caching allocator's first `cudaMalloc`s; CUDA
graph capture (`cudaStreamBeginCapture`, as torch.compile's "reduce-overhead" mode and vLLM do).
A leading step is labelled when it is WARMUP_FACTOR times slower than the median of the steps after
it (needs two of those), or when it holds a one-off phase by itself. Labelling stops at the first
steady step and never takes more than half the steps. A trace of one step (or one window) has
nothing to compare with: it is labelled only by its one-off phases, and then the whole trace is a
one-off phase, not a training step (`Trace.warmup_only`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from operator import attrgetter

import msgspec

from torchpace.trace.events import RuntimeCall, Step
from torchpace.trace.stats import median

WARMUP_FACTOR = 1.5
AUTOTUNE_CALLS = 20  # cudaEventElapsedTime calls in a step that mean algorithm search, not logging
SETUP_MS = 100.0  # time in context/stream/event creation that means CUDA was being set up
# A wait on the device this long before the trace's first device activity waited on work the
# profiler did not record (a copy is staged, a sync returns, in well under a millisecond).
UNRECORDED_WAIT_MS = 1.0
_WAITS = frozenset({"sync", "memcpy"})
_SETUP = ("StreamCreate", "EventCreate", "cuInit", "PrimaryCtx", "CtxCreate", "GetDeviceCount")
_TS, _NAME = attrgetter("ts_us"), attrgetter("name")
_KINDS = frozenset({"other", "event", "malloc"})  # the kinds of every call counted here


def _calls(runtime: Sequence[RuntimeCall], step: Step) -> Sequence[RuntimeCall]:
    """The runtime calls issued during the step (runtime is sorted by start)."""
    lo = bisect_left(runtime, step.ts_us, key=_TS)
    hi = bisect_left(runtime, step.end_us, key=_TS)
    return runtime[lo:hi]


def _counts(calls: Sequence[RuntimeCall]) -> tuple[int, int, float, int]:
    """(graph captures, event-timing calls, ms in CUDA set-up calls, mallocs) among the calls."""
    # Launches, syncs and copies are most calls and none of these: count names in C, then
    # look at the few dozen distinct ones.
    calls = [c for c in calls if c.kind in _KINDS]
    names = Counter(map(_NAME, calls))
    capture = timing = mallocs = 0
    setup = set()
    for name, n in names.items():
        if name.endswith("StreamBeginCapture"):
            capture += n
        elif name.endswith("EventElapsedTime"):
            timing += n
        elif name.endswith(("Malloc", "MallocAsync")):
            mallocs += n
        elif any(s in name for s in _SETUP):
            setup.add(name)
    setup_us = sum(c.dur_us for c in calls if c.name in setup) if setup else 0.0
    return capture, timing, setup_us / 1e3, mallocs


def one_off_phases(
    calls: Sequence[RuntimeCall], later: Sequence[RuntimeCall] | None
) -> tuple[list[str], str]:
    """The one-off phases a step's calls show, and its first allocations ("" for none).

    `later`: a later step's calls, to tell one-off work from work every step does.
    """
    capture, timing, setup_ms, mallocs = _counts(calls)
    base = _counts(later) if later is not None else (0, 0, 0.0, 0)
    api = "hip" if any(c.name.startswith("hip") for c in calls[:50]) else "cuda"
    phases = []
    if capture > base[0]:
        phases.append(f"CUDA graph capture ({capture} {api}StreamBeginCapture)")
    if timing >= AUTOTUNE_CALLS and timing >= 4 * base[1]:
        phases.append(f"cuDNN autotuning ({timing} {api}EventElapsedTime: algorithms timed)")
    if setup_ms >= SETUP_MS:
        phases.append(f"CUDA set-up ({setup_ms:,.0f} ms creating the context, streams, events)")
    first = f"first allocations ({mallocs} {api}Malloc)" if mallocs > 2 * base[3] + 4 else ""
    return phases, first


def _reason(step: Step, later_ms: float, phases: list[str], first: str) -> str:
    """Why the step is warm-up or a one-off phase; "" when it is steady."""
    if later_ms > 0 and step.dur_us / 1e3 > WARMUP_FACTOR * later_ms:
        why = f"warm-up: {step.dur_us / 1e3 / later_ms:.1f}x the median of later steps"
    elif phases:
        why = "one-off phase"
    else:
        return ""
    seen = [*phases, first] if first else phases
    return f"{why}: {'; '.join(seen)}" if seen else why


def unrecorded_wait_ms(calls: Sequence[RuntimeCall], first_device_us: float | None) -> float:
    """The longest wait on the device before the trace's first device activity, in ms."""
    if first_device_us is None:
        return 0.0
    waits = (
        min(c.end_us, first_device_us) - c.ts_us
        for c in calls
        if c.kind in _WAITS and c.ts_us < first_device_us
    )
    return max(waits, default=0.0) / 1e3


def label_warmup(
    steps: tuple[Step, ...], runtime: Sequence[RuntimeCall], first_device_us: float | None = None
) -> tuple[Step, ...]:
    """The steps with `warmup` set on the leading ones that are warm-up or one-off phases.

    `first_device_us`: when the trace's first kernel, copy or memset starts (None: none).
    """
    if not steps:
        return steps
    later_ms = median(s.dur_us for s in steps[1:]) / 1e3 if len(steps) >= 3 else 0.0
    out = list(steps)
    for i, step in enumerate(steps[: max(1, len(steps) // 2)]):
        calls = _calls(runtime, step)
        later = _calls(runtime, steps[i + 1]) if i + 1 < len(steps) else None
        phases, first = one_off_phases(calls, later)
        waited = unrecorded_wait_ms(calls, first_device_us) if i == 0 and later_ms else 0.0
        if waited >= UNRECORDED_WAIT_MS:  # only beside later steps: a lone window stays judged
            phases.append(f"profiler start ({waited:,.1f} ms waiting on device work not recorded)")
        why = _reason(step, later_ms, phases, first)
        if not why:
            break
        out[i] = msgspec.structs.replace(step, warmup=why)
    return tuple(out)
