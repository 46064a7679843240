"""Step-time breakdown: per-step phases on the host, GPU busy time and kernel time by class.

Phases of one step (host time on the training thread), each an explicit range in the trace:
  dataloader  enumerate(DataLoader)#...__next__
  sync        runtime calls in which the training thread waited for the device (trace/blocking.py:
              synchronizes, blocking copies such as .item() or .cpu() into pageable memory)
  h2d         the outermost aten::to/_to_copy/copy_ whose runtime call issued a HtoD memcpy (minus
              the waits inside it: a blocking copy first waits for the queue ahead of it to drain)
  optimizer   Optimizer.step#... and Optimizer.zero_grad#..., less the closures it runs
  backward    each backward pass: from its first to its last autograd::engine::evaluate_function
              (torch <= 1.10: `XxxBackward` nodes), on any thread: the training thread is blocked
              in .backward() meanwhile; a top-level op of the training thread (not a collective)
              between two of them ends a pass (a GAN's next forward); or a user range whose name
              contains "backward"
  forward     a user range whose name contains "forward"; else from the end of the last data
              range before backward (or the step start) up to backward, and between two backward
              passes; without backward, the top-level ops of the training thread
  other       whatever is left (Python overhead, logging, prof.step()...)
Ranges overlap (a copy inside forward, zero_grad inside a backward hook), so each instant of the
step goes to one phase by precedence: dataloader > sync > h2d > optimizer > backward > forward >
other.
The phases of every step therefore add up to its duration exactly.
A closure optimizer (LBFGS: `optimizer.step(closure)`) runs the forward and backward itself; where
the trace marks each closure call (`Optimizer.closure#...`, as `torchpace doctor` records them),
the closure's time is forward and backward (each closure's backward ops spanned on their own), and
only the rest of the step range is the optimizer's; a closure that runs no backward (Lightning's
manual optimization) changes nothing.

Figures are over typical steps: leading warm-up steps and one-off phases (Step.warmup, see
trace/warmup.py) are left out, and so are outliers: steps far longer than the steady ones for a
reason other than waiting for their own batch (trace/outliers.py: the one rule for typical steps).
Shares are time-weighted: a phase's share (and the GPU's busy share) is its time over the typical
steps' time, not a median of per-step shares, which would hide a stall that hits every other step.
`median_phase_ms` holds those shares in milliseconds of the median step (they add up to it).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import compress, pairwise
from operator import attrgetter, itemgetter

import msgspec

from torchpace.trace import intervals as iv
from torchpace.trace.blocking import host_waits
from torchpace.trace.events import HostOp, Step
from torchpace.trace.gpu import KERNEL_CLASSES, GpuColumns, gpu_columns
from torchpace.trace.names import (
    BACKWARD_NODE,
    BACKWARD_OP,
    CLOSURE_PREFIX,
    COMMUNICATION_OP,
    COPY_OPS,
    STEP_MARKER,
    is_dataloader,
    is_optimizer,
)
from torchpace.trace.occupancy import step_figures
from torchpace.trace.outliers import label_outliers
from torchpace.trace.recording import Recording, per_trace
from torchpace.trace.sanity import measured
from torchpace.trace.stats import median
from torchpace.trace.summary import Breakdown, KernelClass, Phase, StepBreakdown, typical_of

_START = itemgetter(0)
_TS, _DUR = attrgetter("ts_us"), attrgetter("dur_us")
PRECEDENCE = (
    Phase.DATALOADER, Phase.SYNC, Phase.H2D, Phase.OPTIMIZER, Phase.BACKWARD, Phase.FORWARD,
)  # fmt: skip
_FORWARD_NOTE = re.compile(r"forward", re.I)
_BACKWARD_NOTE = re.compile(r"backward", re.I)


class PhaseRanges(msgspec.Struct, frozen=True):
    """Every phase's raw ranges over the whole trace (before precedence), sorted by start.

    A Struct, not a dataclass: an internal view, and a frozen dataclass costs ~0.9 ms to define.
    """

    dataloader: list[iv.Interval]
    h2d: list[iv.Interval]
    optimizer: list[iv.Interval]
    backward_ops: list[iv.Interval]
    backward_notes: list[iv.Interval]
    forward_notes: list[iv.Interval]
    top_level: list[iv.Interval]  # top-level ops of the training thread (no-backward forward)
    communication: list[iv.Interval]  # collectives on the host (nccl:*, gloo:*, c10d::*)
    backward_tids: frozenset[int]  # threads that run autograd (the training thread on CPU)
    # Waits on the device by the training threads; Optimizer.closure#... ranges.
    sync: list[iv.Interval] = msgspec.field(default_factory=list)
    closures: list[iv.Interval] = msgspec.field(default_factory=list)
    # The longest range of each list above (by id): how far before a window to look for
    # ranges reaching into it, so a step's ranges are found by bisection, not a scan.
    longest: dict[int, float] = msgspec.field(default_factory=dict)

    def within(self, ranges: list[iv.Interval], lo: float, hi: float) -> list[iv.Interval]:
        """The ranges of one of these lists that overlap [lo, hi), cut to it."""
        longest = self.longest.get(id(ranges))
        if longest is None:
            longest = self.longest[id(ranges)] = max((e - s for s, e in ranges), default=0.0)
        i = bisect_left(ranges, lo - longest, key=_START)
        j = bisect_left(ranges, hi, key=_START)
        return iv.clip((r for r in ranges[i:j] if r[1] > lo), lo, hi)


def _ranges(ops: Sequence[HostOp]) -> list[iv.Interval]:
    return [(o.ts_us, o.ts_us + o.dur_us) for o in ops]


def h2d_ops(trace: Recording) -> list[HostOp]:
    """Host ops that copy to the device: the outermost copy op issuing each HtoD memcpy."""
    found: dict[int, HostOp] = {}
    for copy in trace.copies:
        if copy.direction != "HtoD":
            continue
        launcher = trace.launcher(copy)
        if launcher is None:
            continue
        chain = trace.enclosing_ops(launcher.tid, launcher.ts_us, launcher.end_us)
        copies = [o for o in chain if o.name in COPY_OPS]
        op = copies[-1] if copies else launcher
        found[id(op)] = op  # ops live as long as the trace: id() is a key
    return sorted(found.values(), key=lambda o: o.ts_us)


def _name_role(name: str, annotation: bool) -> str:
    """Which phase list a host range's name puts it in ("" for none)."""
    if COMMUNICATION_OP.search(name):
        return "comm"
    if is_dataloader(name):
        return "data"
    if is_optimizer(name):
        return "opt"
    if name.startswith(CLOSURE_PREFIX):
        return "closure"
    if name.startswith(BACKWARD_OP) or (
        ("Backward" in name or "AccumulateGrad" in name) and BACKWARD_NODE.match(name)
    ):
        return "bwd"
    if annotation and not name.startswith(STEP_MARKER):
        if _BACKWARD_NOTE.search(name):
            return "bnote"
        if _FORWARD_NOTE.search(name):
            return "fnote"
    return ""


_NAME = attrgetter("name")


@per_trace
def phase_ranges(trace: Recording) -> PhaseRanges:
    """Each phase's ranges over the whole trace (one pass over the host ops)."""
    # Names repeat (a few hundred distinct among 10^5 ops): classify each name once, then visit
    # only the ops whose name has a phase (most aten ops have none).
    ops = trace.host_ops
    names = trace.op_names
    roles = {
        annotation: {n: r for n in names if (r := _name_role(n, annotation))}
        for annotation in (False, True)
    }
    phased = roles[False].keys() | roles[True].keys()
    bwd_tids: set[int] = set()
    found: dict[str, list[iv.Interval]] = {
        role: [] for role in ("data", "opt", "bwd", "bnote", "fnote", "comm", "closure")
    }
    for op in compress(ops, map(phased.__contains__, map(_NAME, ops))):
        role = roles[op.kind == "annotation"].get(op.name)
        if role:
            found[role].append((op.ts_us, op.ts_us + op.dur_us))
            if role == "bwd":
                bwd_tids.add(op.tid)
    return PhaseRanges(
        found["data"],
        _ranges(h2d_ops(trace)),
        found["opt"],
        found["bwd"],
        found["bnote"],
        found["fnote"],
        top_level_ranges(trace, (trace.main_tid,)),
        found["comm"],
        frozenset(bwd_tids),
        _wait_ranges(trace, {trace.main_tid} | bwd_tids),
        closures=found["closure"],
    )


def _wait_ranges(trace: Recording, tids: Collection[int]) -> list[iv.Interval]:
    """Where the training threads waited for the device (a wait on a loader thread is loading)."""
    return [(w.call.ts_us, w.end_us) for w in host_waits(trace) if w.call.tid in tids]


def top_level_ranges(trace: Recording, tids: Collection[int]) -> list[iv.Interval]:
    """Ranges of the outermost aten ops on the given threads (ProfilerStep# excluded), by start."""
    ranges = [r for tid in tids for r in _top_level(trace, tid)]
    return sorted(ranges) if len(tids) > 1 else ranges


def _top_level(trace: Recording, tid: int) -> list[iv.Interval]:
    """One thread's outermost aten ops (cached): from each, a jump past the ops it holds."""
    key = f"top_level:{tid}"
    if key in trace._cache:
        return trace._cache[key]  # type: ignore[return-value]
    ops = trace.ops_on(tid)
    starts = [op.ts_us for op in ops]
    ranges: list[iv.Interval] = []
    end = -1.0
    k, n = 0, len(ops)
    while k < n:
        op = ops[k]
        if op.ts_us < end:  # inside the last one taken
            k = bisect_left(starts, end, k + 1)
            continue
        if op.kind == "op" and not op.name.startswith(STEP_MARKER):
            end = op.ts_us + op.dur_us
            ranges.append((op.ts_us, end))
        k += 1
    trace._cache[key] = ranges
    return ranges


def step_phase_ranges(r: PhaseRanges, lo: float, hi: float) -> dict[Phase, list[iv.Interval]]:
    """One step's ranges per phase, before precedence is applied."""
    _within = r.within
    out = {
        Phase.DATALOADER: _within(r.dataloader, lo, hi),
        Phase.SYNC: _within(r.sync, lo, hi),
        Phase.H2D: _within(r.h2d, lo, hi),
        Phase.OPTIMIZER: _within(r.optimizer, lo, hi),
    }
    bwd = _within(r.backward_ops, lo, hi)
    # A closure that runs no backward is not a forward and backward (Lightning's manual
    # optimization steps each optimizer with an empty closure: its GAN read forward 0.3%).
    closures = [c for c in _within(r.closures, lo, hi) if any(_inside(b, c) for b in bwd)]
    if closures:
        return _closure_step(r, out, closures, bwd, lo, hi)
    passes = _backward_passes(bwd, r)
    out[Phase.BACKWARD] = _within(r.backward_notes, lo, hi) + passes
    forward = _within(r.forward_notes, lo, hi)
    if not forward and bwd:
        b0 = min(s for s, _ in out[Phase.BACKWARD])
        # zero_grad often sits between forward and backward: only data loading bounds forward.
        before = [e for _, e in out[Phase.DATALOADER] if e <= b0]
        # Between two backward passes runs the next forward (an optimizer step, claimed first).
        between = [(a[1], b[0]) for a, b in pairwise(passes)]
        forward = [(max([lo, *before]), b0), *between]
    elif not forward:
        forward = _within(r.top_level, lo, hi)
    out[Phase.FORWARD] = forward
    return out


def _backward_passes(bwd: list[iv.Interval], r: PhaseRanges) -> list[iv.Interval]:
    """A step's backward ops as one span per backward pass: the training thread's work between
    two of them (a top-level op, not a collective) ends a pass. One span from the first backward
    op to the last read a GAN's second forward as backward (Lightning's GAN example: D's
    forward after G's step; pytorch/examples' DCGAN: G's and D's forwards between D's two)."""
    spans: list[iv.Interval] = []
    for s, e in sorted(bwd):
        if spans and (s <= spans[-1][1] or not _work_between(r, spans[-1][1], s)):
            spans[-1] = (spans[-1][0], max(spans[-1][1], e))
        else:
            spans.append((s, e))
    return spans


def _work_between(r: PhaseRanges, a: float, b: float) -> bool:
    """Whether a top-level op of the training thread, not a collective, runs inside (a, b)."""
    top = r.top_level
    for i in range(bisect_left(top, a, key=_START), len(top)):  # no copy of the list's tail
        s, e = top[i]
        if s >= b:
            return False
        if e <= b and not any(cs <= s and e <= ce for cs, ce in r.within(r.communication, s, e)):
            return True
    return False


def _inside(span: iv.Interval, outer: iv.Interval) -> bool:
    return outer[0] <= span[0] and span[1] <= outer[1]


# complex: one pass of interval arithmetic over a closure step's backward, optimizer and forward
# ranges; its comprehensions filter, they do not branch.
def _closure_step(
    r: PhaseRanges,
    out: dict[Phase, list[iv.Interval]],
    closures: list[iv.Interval],
    bwd: list[iv.Interval],
    lo: float,
    hi: float,
) -> dict[Phase, list[iv.Interval]]:
    """A step whose optimizer runs closures: each closure is forward and backward, not optimizer."""
    inside = [(s, e) for s, e in bwd if any(cs <= s and e <= ce for cs, ce in closures)]
    outside = [b for b in bwd if b not in inside]
    spans = [
        (min(s for s, _ in mine), max(e for _, e in mine))
        for cs, ce in closures
        if (mine := [(s, e) for s, e in inside if cs <= s and e <= ce])
    ]
    if outside:
        spans.append((min(s for s, _ in outside), max(e for _, e in outside)))
    out[Phase.BACKWARD] = r.within(r.backward_notes, lo, hi) + spans
    # The optimizer keeps its own ranges less the closures inside them (zero_grad inside a
    # closure is a range of its own: it stays the optimizer's).
    out[Phase.OPTIMIZER] = [
        piece
        for s, e in out[Phase.OPTIMIZER]
        for piece in iv.subtract([(s, e)], iv.union(c for c in closures if s <= c[0] and c[1] <= e))
    ]
    out[Phase.FORWARD] = r.within(r.forward_notes, lo, hi) or closures
    return out


def exclusive_phase_us(
    ranges: Mapping[Phase, list[iv.Interval]], duration_us: float
) -> dict[Phase, float]:
    """Microseconds per phase after precedence; OTHER takes the rest, so they sum to duration."""
    claimed: list[iv.Interval] = []
    out: dict[Phase, float] = {}
    for phase in PRECEDENCE:
        mine = iv.subtract(iv.union(ranges.get(phase, [])), claimed)
        out[phase] = iv.total(mine)
        claimed = iv.union([*claimed, *mine])
    # From the step's own duration: end - start of microsecond epochs loses ~0.25 us in float64.
    out[Phase.OTHER] = max(0.0, duration_us - sum(out.values()))
    return out


def _kernel_ms(cols: GpuColumns, lo: float, hi: float) -> dict[KernelClass, float]:
    # Kernels count in the step during which they start.
    i, j = bisect_left(cols.kernel_starts, lo), bisect_left(cols.kernel_starts, hi)
    sums = [0.0] * len(KERNEL_CLASSES)
    for klass, dur in zip(cols.kernel_class[i:j], cols.kernel_durs[i:j], strict=True):
        sums[klass] += dur
    return {k: sums[n] / 1e3 for n, k in enumerate(KERNEL_CLASSES)}


def _step(trace: Recording, r: PhaseRanges, cols: GpuColumns | None, step: Step) -> StepBreakdown:
    lo, hi = step.ts_us, step.end_us
    phases = exclusive_phase_us(step_phase_ranges(r, lo, hi), step.dur_us)
    busy_us = None if cols is None else cols.busy.covered(lo, hi)
    sm = occupancy = None
    if cols is not None and busy_us is not None:
        i, j = bisect_left(cols.kernel_starts, lo), bisect_left(cols.kernel_starts, hi)
        sm, occupancy = step_figures(cols.launch, cols.kernel_durs, i, j, busy_us, step.dur_us)
    return StepBreakdown(
        index=step.index,
        start_us=lo,
        duration_ms=step.dur_us / 1e3,
        phase_ms={p: phases.get(p, 0.0) / 1e3 for p in Phase},
        gpu_busy_ms=None if busy_us is None else busy_us / 1e3,
        kernel_ms_by_class=None if cols is None else _kernel_ms(cols, lo, hi),
        sm_efficiency=sm,
        achieved_occupancy=occupancy,
        warmup=step.warmup,
        # Batches whose loading starts in the step: more than usual means a second loader ran.
        batches=bisect_left(r.dataloader, hi, key=_START)
        - bisect_left(r.dataloader, lo, key=_START),
    )


def _median_phases(typical: Sequence[StepBreakdown], median_step: float) -> dict[Phase, float]:
    """Each phase's share of the typical steps' time, in milliseconds of the median step."""
    totals = {p: sum(s.phase_ms[p] for s in typical) for p in Phase}
    whole = sum(totals.values())
    scale = median_step / whole if whole > 0 else 0.0
    return {p: v * scale for p, v in totals.items()}


def _weighted(pairs: Iterable[tuple[float | None, float]]) -> float | None:
    """The mean of the known values, weighted (a share of the steps' time, not a median)."""
    known = [(v, w) for v, w in pairs if v is not None and w > 0]
    weight = sum(w for _, w in known)
    return sum(v * w for v, w in known) / weight if weight > 0 else None


# complex: the Breakdown's fields, each guarded where a trace lacks device timing.
def compute_breakdown(trace: Recording) -> Breakdown:
    """The Breakdown of a trace (see the module docstring for the phase rules)."""
    # Device work without any duration measures no busy time: unknown, not 0% (see trace.sanity).
    timed = measured(trace.kernels) or measured(trace.copies) or measured(trace.memsets)
    cols = gpu_columns(trace) if timed else None
    ranges = phase_ranges(trace)
    steps = label_outliers(trace, [_step(trace, ranges, cols, s) for s in trace.steps])
    typical = typical_of(steps)
    if not typical:
        return Breakdown((), 0.0, {p: 0.0 for p in Phase})
    median_step = median(s.duration_ms for s in typical)
    busy = None
    kernels = None
    lasting = [s for s in typical if s.duration_ms > 0]  # a 0-ms step has no busy share
    if cols is not None:
        busy = _weighted(((s.gpu_busy_ms or 0.0) / s.duration_ms, s.duration_ms) for s in lasting)
        kernels = {
            k: median((s.kernel_ms_by_class or {}).get(k, 0.0) for s in typical)
            for k in KERNEL_CLASSES
        }
    return Breakdown(
        steps=tuple(steps),
        median_step_ms=median_step,
        median_phase_ms=_median_phases(typical, median_step),
        gpu_busy_fraction=busy,
        kernel_ms_by_class=kernels,
        # Weighted like the busy share, so SM efficiency stays under it.
        sm_efficiency=_weighted((s.sm_efficiency, s.duration_ms) for s in typical),
        achieved_occupancy=_weighted((s.achieved_occupancy, s.gpu_busy_ms or 0.0) for s in typical),
    )
