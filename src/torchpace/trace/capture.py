"""CUDA/HIP graph capture: a one-off phase whose allocations build the graph's memory pool.

A capture is a `cudaStreamBeginCapture` .. `cudaStreamEndCapture` pair (hip*, cu* alike) on one
thread. Frameworks wrap captures in a range of their own (vLLM: `capture_<size>_PIECEWISE`) that
also frees the cache before capturing and allocates the graph's inputs after, so the phase is the
outermost user range around the capture, cut to the profiler step that holds it; a capture with no
range around it is the pair alone.
"""

from __future__ import annotations

import re
from operator import attrgetter
from typing import TYPE_CHECKING

from torchpace.trace import intervals as iv
from torchpace.trace.names import LOOP_MARKERS
from torchpace.trace.recording import per_trace

if TYPE_CHECKING:
    from torchpace.trace.events import RuntimeCall
    from torchpace.trace.model import Trace

_BEGIN = re.compile(r"^(cuda|hip|cu)StreamBeginCapture")
_END = re.compile(r"^(cuda|hip|cu)StreamEndCapture")
_NAME = attrgetter("name")


@per_trace
def capture_ranges(trace: Trace) -> list[iv.Interval]:
    """The graph-capture phases of the trace, merged and sorted ([] when none)."""
    others = trace.runtime_of_kind("other")
    # A few hundred distinct names among 10^4 calls: match the names, not every call.
    wanted = {n for n in {r.name for r in others} if _BEGIN.match(n) or _END.match(n)}
    calls = [r for r in others if r.name in wanted] if wanted else []
    ranges = [_phase(trace, begin, end) for begin, end in _pairs(calls)]
    return iv.union(ranges)


def _pairs(calls: list[RuntimeCall]) -> list[tuple[RuntimeCall, RuntimeCall]]:
    """Each begin with the next end on its thread (captures on one thread do not nest)."""
    open_: dict[int, RuntimeCall] = {}
    out = []
    for call in calls:
        if _BEGIN.match(call.name):
            open_[call.tid] = call
        elif call.tid in open_:
            out.append((open_.pop(call.tid), call))
    return out


def _phase(trace: Trace, begin: RuntimeCall, end: RuntimeCall) -> iv.Interval:
    lo, hi = begin.ts_us, end.end_us
    around = [
        o
        for o in trace.enclosing_ops(begin.tid, lo, hi)
        if o.kind == "annotation" and not o.name.startswith(LOOP_MARKERS)
    ]
    if around:
        lo, hi = around[-1].ts_us, around[-1].end_us
    step = trace.step_at(begin.ts_us) if trace.info.step_source == "profiler-step" else None
    if step is not None:
        lo, hi = max(lo, step.ts_us), min(hi, step.end_us)
    return (lo, hi)
