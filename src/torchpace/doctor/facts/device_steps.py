"""The step's length where the device sets it: a GPU that lags the host.

A step's range in the trace is the host's (ProfilerStep#N, or the loop's markers). When nothing
in a step waits for the device (no `.item()`, no blocking copy), a GPU-bound loop's host runs
ahead, queueing steps while the GPU still runs those launched before: the host's step is shorter
than the GPU's, and the kernels that start inside it belong to earlier steps. Recorded on an H200
(tests/fixtures/traces/gpu_lag/): host steps of 1.8-2.9 ms while each step's kernels took 30.3 ms
of GPU timeline, the step time measured side by side; per host step, the fp32 GEMM time read
1.02 of the step.

So each typical step's device window is the span of the device work its own runtime calls issued
(correlation ids), and its length on the device the time from its first device work to the next
step's (the last step: its span). Where the device's steps are clearly longer than the host's,
the device's windows and lengths are the steps' for what the kernels measure.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from operator import attrgetter

import msgspec

from torchpace.trace.events import GpuEvent, Step
from torchpace.trace.model import Trace
from torchpace.trace.stats import median

# Step to step, the device's starts follow the host's when the device keeps up (a few % of
# jitter); a device step this much longer than the host's means the host ran ahead.
LAG_FACTOR = 1.25
_TS = attrgetter("ts_us")


class DeviceSteps(msgspec.Struct, frozen=True):
    """The typical steps on the device: whether it lags the host, the step's length, windows."""

    host_ms: float  # the breakdown's median step (host ranges)
    device_ms: float | None  # the median step on the device where it lags; else None
    windows: tuple[tuple[float, float], ...]  # (start_us, end_us) of each step's device work

    @property
    def lags(self) -> bool:
        """Whether the device's steps are clearly longer than the host's (the host ran ahead)."""
        return self.device_ms is not None

    @property
    def step_ms(self) -> float:
        """The step's length: the device's when it lags the host, else the host's."""
        return self.host_ms if self.device_ms is None else self.device_ms


def device_steps(trace: Trace) -> DeviceSteps:
    """Each typical step's device window and, where the device lags the host, its step length.

    Step by step: a step's device length against its own host range (a step that issued no
    device work is not compared); the device lags when the median ratio exceeds LAG_FACTOR.
    """
    host_ms = trace.breakdown.median_step_ms
    steps = trace.typical_steps
    if not steps or not trace.has_gpu:
        return DeviceSteps(host_ms, None, ())
    spans = _device_spans(trace, steps)
    lengths, ratios = [], []
    for k, (step, span) in enumerate(zip(steps, spans, strict=True)):
        if span is None:
            lengths.append(step.dur_us / 1e3)
            continue
        after = spans[k + 1] if k + 1 < len(spans) else None
        adjacent = after is not None and steps[k + 1].index == step.index + 1
        device = (after[0] if after and adjacent else span[1]) - span[0]
        lengths.append(max(device, step.dur_us) / 1e3)
        if step.dur_us > 0:
            ratios.append(device / step.dur_us)
    windows = tuple(s for s in spans if s is not None)
    if not ratios or median(ratios) <= LAG_FACTOR:
        return DeviceSteps(host_ms, None, windows)
    return DeviceSteps(host_ms, median(lengths), windows)


def _device_spans(trace: Trace, steps: Sequence[Step]) -> list[tuple[float, float] | None]:
    """Per step, the span of the device work that runtime calls inside it issued (None: none)."""
    work: dict[int | None, GpuEvent] = {}
    for lane in (trace.kernels, trace.copies, trace.memsets):
        # Work issued in the first step cannot start before it (lanes are sorted by start).
        work.update({g.correlation: g for g in lane[bisect_left(lane, steps[0].ts_us, key=_TS) :]})
    work.pop(None, None)
    calls, get = trace.runtime, work.get
    out: list[tuple[float, float] | None] = []
    for step in steps:
        i = bisect_left(calls, step.ts_us, key=_TS)
        j = bisect_right(calls, step.end_us, key=_TS)
        linked = [g for c in calls[i:j] if (g := get(c.correlation)) is not None]
        if linked:  # lists, not generators, for min and max: 10% less here on 22k kernels
            out.append((min([g.ts_us for g in linked]), max([g.ts_us + g.dur_us for g in linked])))
        else:
            out.append(None)
    return out
