"""The memory view: a step's peak memory split into what holds it, and the largest blocks at the
peak with the line that made each.

From the trace alone (`torchpace analyze`): the profiler's `[memory]` events pair each
allocation with its free by address, so the blocks alive at the step's peak are known, with the
phase that made them (forward: activations), the op and (with_stack) the user's line. Under the
doctor, the live census at the window's end (runner/sensors/memory_census.py) names the blocks
that are parameters, gradients, optimizer state or buffers, and counts what the window never saw
allocated (on CPU the profiler counts only what was allocated while it recorded).

Measured peak: on CUDA the allocator's Total Allocated at the peak (absolute) and Total Reserved
(its reserve = reserved - allocated); on CPU the census's bytes held from before the window plus
Total Allocated at the peak (the rise since the profiler started).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from torchpace.trace.breakdown import phase_ranges, step_phase_ranges
from torchpace.trace.events import MemoryTimeline, Step
from torchpace.trace.model import Trace
from torchpace.trace.nesting import Nesting
from torchpace.trace.stacks import SourceLocation
from torchpace.trace.summary import Phase

if TYPE_CHECKING:
    from torchpace.runner.sensors.memory import MemoryRecord
    from torchpace.runner.sensors.memory_census import Census, HeldBlock

LARGEST = 10
_PRECEDENCE = (Phase.BACKWARD, Phase.OPTIMIZER, Phase.DATALOADER, Phase.H2D, Phase.FORWARD)
_MODULE = "nn.Module: "
_ZERO_GRAD = "Optimizer.zero_grad#"


def _is_zero_grad(name: str) -> bool:
    return name.startswith(_ZERO_GRAD)


@dataclass(frozen=True)
class PeakBlock:
    """One block alive at the peak."""

    bytes: int
    category: str  # "activations", "parameters", ..., or "other"
    phase: str  # the phase that allocated it: "forward", "backward", "earlier step", ...
    op: str  # the op that allocated it ("aten::addmm"); "" when none enclosed it
    where: SourceLocation | None  # the user's line (with_stack); None without stacks
    module: str = ""  # the innermost nn.Module running ("Linear_3"), with_stack only
    block: str = ""  # the model's child it ran in ("Block_1"): where checkpointing would go
    row: int = -1  # its allocation's row in the memory timeline (where op and line are looked up)


@dataclass(frozen=True)
class MemoryView:
    """A step's peak, split by what holds it."""

    device: str  # "GPU" or "CPU"
    step_index: int
    peak_ms: float  # from the step's start
    peak_bytes: int | None  # allocated at the peak; None: unknown (CPU trace without a census)
    rise_bytes: int  # allocated at the peak minus at the step's start
    reserve_bytes: int | None  # CUDA: reserved - allocated at the peak; None on CPU
    # (category, bytes), in the order shown; with the live run: parameters, gradients, optimizer
    # state, buffers, activations, other; from a trace: activations, made in the step, before it.
    categories: tuple[tuple[str, int], ...]
    largest: tuple[PeakBlock, ...]
    activation_modules: tuple[tuple[str, int], ...]  # (module, bytes) of the forward's blocks
    live: bool  # the categories come from the live census
    notes: tuple[str, ...] = ()

    @property
    def total_bytes(self) -> int:
        """Allocated plus reserve at the peak: what the categories add up to."""
        return (self.peak_bytes or 0) + (self.reserve_bytes or 0)


def _timeline(trace: Trace) -> tuple[MemoryTimeline, str]:
    mem, device = trace.device_memory, "GPU"
    if not len(mem):
        mem, device = trace.memory, "CPU"
    if len(mem):
        most = Counter(mem.device_id).most_common(1)[0][0]
        mem = mem.where([d == most for d in mem.device_id]).in_time_order()
    return mem, device


def _rows(mem: MemoryTimeline, step: Step) -> range:
    from bisect import bisect_left, bisect_right

    return range(bisect_left(mem.ts_us, step.ts_us), bisect_right(mem.ts_us, step.end_us))


def _peak_step(trace: Trace, mem: MemoryTimeline) -> tuple[Step, int] | None:
    """The step with the highest allocation peak and the row of its peak. The window's first step
    is left out when there are others: frees of blocks made before the profiler went unrecorded."""
    steps = trace.typical_steps or trace.steps
    if len(steps) > 1 and steps[0].index == trace.steps[0].index:
        steps = steps[1:]
    best: tuple[Step, int] | None = None
    total = mem.total_allocated
    for step in steps:
        rows = [i for i in _rows(mem, step) if math.isfinite(total[i])]
        if rows:
            peak = max(rows, key=total.__getitem__)
            if best is None or total[peak] > total[best[1]]:
                best = (step, peak)
    return best


class _Replay(msgspec.Struct, frozen=True):
    at_peak: dict[int, tuple[int, int]]  # blocks made in the window alive at the peak: (bytes, row)
    survivors: set[int]  # those of them still alive at the window's end (the census saw them)
    made: set[int]  # every address the window allocated
    freed_at: dict[int, float]  # of the blocks alive at the peak, when each was freed


def _replay(mem: MemoryTimeline, peak: int) -> _Replay:
    """Pair allocations with frees by address, up to the window's end."""
    live: dict[int, tuple[int, int]] = {}
    at_peak: dict[int, tuple[int, int]] = {}
    freed_at: dict[int, float] = {}
    for i, (size, addr) in enumerate(zip(mem.bytes, mem.addr, strict=True)):
        if size > 0:
            live[addr] = (int(size), i)
        elif size < 0:
            gone = live.pop(addr, None)
            if i > peak and gone is not None and at_peak.get(addr) == gone:
                freed_at[addr] = mem.ts_us[i]
        if i == peak:
            at_peak = dict(live)
    survivors = {a for a, (_, row) in at_peak.items() if live.get(a, (0, -1))[1] == row}
    made = {a for a, size in zip(mem.addr, mem.bytes, strict=True) if size > 0}
    return _Replay(at_peak, survivors, made, freed_at)


def _phase_of(ranges: dict[Phase, list[tuple[float, float]]], ts: float) -> str:
    for phase in _PRECEDENCE:
        if any(s <= ts <= e for s, e in ranges.get(phase, ())):
            return phase.value
    return Phase.OTHER.value


class _Places:
    """Where an allocation was made: the op and Python frames enclosing its instant."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.frames: dict[int, Nesting] = {}

    def op_and_line(self, tid: int, ts: float) -> tuple[str, SourceLocation | None]:
        ops = self.trace.enclosing_ops(tid, ts, ts)
        aten = [o for o in ops if o.kind == "op"]
        if not aten:
            return "", None
        return self.trace.top_op(aten[0]).name, self.trace.user_frame(aten[0])

    def modules(self, tid: int, ts: float) -> tuple[str, str]:
        """The innermost nn.Module running, and the outermost but one (a model's block)."""
        if tid not in self.frames:
            self.frames[tid] = Nesting([f for f in self.trace.python_frames if f.tid == tid])
        nest = self.frames[tid]
        names = [nest.items[i].name for i in nest.chain(ts, ts)]  # type: ignore[attr-defined]
        mods = [str(n[len(_MODULE) :]) for n in names if n.startswith(_MODULE)]
        if not mods:
            return "", ""
        return mods[0], mods[-2] if len(mods) > 1 else mods[0]


# complex: the peak step's blocks named in one pass, the census and zero_grad deciding each name.
def memory_view(trace: Trace, census: Census | None = None) -> MemoryView | None:
    """The memory view of the trace's peak step (with the live census under the doctor); None
    when the trace has no memory events or no steps."""
    mem, device = _timeline(trace)
    if not len(mem) or not trace.steps or all(a < 0 for a in mem.addr):
        return None
    found = _peak_step(trace, mem)
    if found is None:
        return None
    step, peak = found
    seen = _replay(mem, peak)
    ranges = step_phase_ranges(phase_ranges(trace), step.ts_us, step.end_us)
    places = _Places(trace)
    named = {b.addr: b.category for b in census.blocks} if census is not None else {}
    zeroing = [(o.ts_us, o.end_us) for o in trace.ops_where_name(_is_zero_grad)]
    blocks = []
    for addr, (size, row) in seen.at_peak.items():
        # A census name counts only for a block alive from the peak to the window's end: an
        # address freed meanwhile may hold another tensor by then (allocators reuse addresses).
        # A block zero_grad(set_to_none=True) freed after the peak was a gradient.
        name = named.get(addr) if addr in seen.survivors else None
        freed = seen.freed_at.get(addr)
        if freed is not None and any(s <= freed <= e for s, e in zeroing):
            name = "gradients"
        blocks.append(_block(mem, places, ranges, step, size, row, name))
    before = [b for b in census.blocks if b.addr not in seen.made] if census is not None else None
    return _assemble(trace, mem, device, step, peak, blocks, before)


def _block(
    mem: MemoryTimeline,
    places: _Places,
    ranges: dict[Phase, list[tuple[float, float]]],
    step: Step,
    size: int,
    row: int,
    named: str | None,
) -> PeakBlock:
    ts, tid = mem.ts_us[row], mem.tid[row]
    phase = _phase_of(ranges, ts) if ts >= step.ts_us else "earlier step"
    if named == "other":
        named = None
    category = named or ("activations" if phase == "forward" else "temporaries")
    module, block = places.modules(tid, ts) if phase == "forward" else ("", "")
    return PeakBlock(size, category, phase, "", None, module, block, row)


def _placed(places: _Places, mem: MemoryTimeline, b: PeakBlock) -> PeakBlock:
    from dataclasses import replace

    op, where = places.op_and_line(mem.tid[b.row], mem.ts_us[b.row])
    return replace(b, op=op, where=where)


def _assemble(
    trace: Trace,
    mem: MemoryTimeline,
    device: str,
    step: Step,
    peak: int,
    blocks: list[PeakBlock],
    before: list[HeldBlock] | None,
) -> MemoryView:
    from torchpace.doctor.memory_split import split

    rows = _rows(mem, step)
    start = mem.total_allocated[rows[0]] - mem.bytes[rows[0]] if len(rows) else 0.0
    allocated, reserved = mem.total_allocated[peak], mem.total_reserved[peak]
    gpu = device == "GPU"
    modules: Counter[str] = Counter()
    for b in blocks:
        if b.category == "activations" and b.block:
            modules[b.block] += b.bytes
    # Op and line for the largest only: a GPU step's peak holds thousands of blocks.
    places = _Places(trace)
    largest = [_placed(places, mem, b) for b in sorted(blocks, key=lambda b: -b.bytes)[:LARGEST]]
    categories, peak_bytes, notes = split(blocks, before, allocated, gpu=gpu)
    reserve = int(reserved - allocated) if gpu and math.isfinite(reserved) else None
    if reserve:
        categories = (*categories, ("allocator reserve", reserve))
    return MemoryView(
        device=device,
        step_index=step.index,
        peak_ms=(mem.ts_us[peak] - step.ts_us) / 1e3,
        peak_bytes=peak_bytes,
        rise_bytes=int(allocated - start),
        reserve_bytes=reserve,
        categories=categories,
        largest=tuple(largest),
        activation_modules=tuple(modules.most_common(5)),
        live=before is not None,
        notes=notes if trace.has_stacks else (*notes, _NO_STACKS),
    )


_NO_STACKS = "allocations have no source lines: the trace has no Python stacks (with_stack=True)"


def live_notes(record: MemoryRecord) -> tuple[str, ...]:
    """What the live run adds to the view: tensors kept across steps, the CUDA allocator's own
    peaks and retries."""
    notes = []
    grew = record.growth
    if grew is not None:
        largest = f" (largest new: {'; '.join(grew.largest)})" if grew.largest else ""
        notes.append(
            f"tensors outside the model and optimizer grew {grew.bytes / 2**20:.1f} MiB over "
            f"{grew.steps} profiled steps{largest}: something keeps them across steps, and the "
            "run will run out of memory in time (keep .item() or .detach() values, not tensors)"
        )
    if record.cuda_peak_reserved_bytes is not None:
        notes.append(
            "the CUDA allocator's own peaks since the start: "
            f"{(record.cuda_peak_allocated_bytes or 0) / 2**30:.2f} GiB allocated, "
            f"{record.cuda_peak_reserved_bytes / 2**30:.2f} GiB reserved; "
            f"{record.cuda_alloc_retries or 0} allocation retries (cudaFree + cudaMalloc)"
        )
    return tuple(notes)
