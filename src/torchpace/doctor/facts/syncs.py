"""Sync points: each place the host blocked on the device, with its cause, direction and cost.

Built once per trace from the waits the trace layer finds (trace/blocking.py) and read by
sync-point and gpu-idle. The waits of one op form one sync point: a device-to-host copy into
pageable memory and the stream synchronize after it are one `.cpu()`, not two.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from operator import attrgetter
from typing import Literal

import msgspec

from torchpace.trace.blocking import (
    HostWait,
    copies_by_correlation,
    host_memory_blocks,
    host_waits,
)
from torchpace.trace.events import CopyDirection, GpuEvent, HostOp, RuntimeCall
from torchpace.trace.gpu import GpuColumns, gpu_columns
from torchpace.trace.model import Trace
from torchpace.trace.recording import per_trace
from torchpace.trace.stacks import SourceLocation

# What made the host wait, from the op that caused it and the copy it waited for.
SyncKind = Literal[
    "d2h-copy", "h2d-copy", "d2d-copy", "item", "branch", "data-dependent-shape", "synchronize",
    "other",
]  # fmt: skip
Direction = Literal["device-to-host", "host-to-device", "device-to-device", "none"]
# How a report names each kind: (one, many).
KIND_WORDS: dict[str, tuple[str, str]] = {
    "d2h-copy": ("device-to-host copy", "device-to-host copies"),
    "h2d-copy": ("blocking host-to-device copy", "blocking host-to-device copies"),
    "d2d-copy": ("blocking device-to-device copy", "blocking device-to-device copies"),
    "item": (".item() read", ".item() reads"),
    "branch": ("tensor truth test (if tensor:)", "tensor truth tests (if tensor:)"),
    "data-dependent-shape": (
        "op with a data-dependent shape (nonzero, x[mask])",
        "ops with data-dependent shapes (nonzero, x[mask])",
    ),
    "synchronize": ("explicit synchronize", "explicit synchronizes"),
    "other": ("other wait", "other waits"),
}
# Ops whose result the host needs now: they copy to the host and wait for the device.
_SYNC_OPS: dict[str, SyncKind] = {
    "aten::item": "item", "aten::_local_scalar_dense": "item", "aten::tolist": "item",
    "aten::is_nonzero": "branch", "aten::equal": "branch",
    "aten::nonzero": "data-dependent-shape", "aten::masked_select": "data-dependent-shape",
    "aten::_unique2": "data-dependent-shape", "aten::unique_consecutive": "data-dependent-shape",
    "aten::repeat_interleave": "data-dependent-shape", "aten::nonzero_static": "data-dependent-shape",
}  # fmt: skip
# Reading a scalar from host memory takes microseconds; one that takes this long waited for the
# device, whether or not the trace recorded the device (a CPU-activities-only recording).
SLOW_SCALAR_READ_US = 1_000.0
# (Not `tolist` or `equal`: on a CPU tensor those walk the whole tensor, which can take that long.)
SCALAR_READ_KINDS: dict[str, SyncKind] = {
    "aten::item": "item", "aten::_local_scalar_dense": "item", "aten::is_nonzero": "branch",
}  # fmt: skip
_DIRECTIONS: dict[CopyDirection, Direction] = {
    "DtoH": "device-to-host", "HtoD": "host-to-device", "DtoD": "device-to-device",
}  # fmt: skip
_TS = attrgetter("ts_us")
# After a sync, idle longer than this has other causes (data loading, the next step's host work):
# the sync is charged for the queue refill, not for whatever the host did next.
IDLE_AFTER_CAP_US = 5_000.0
_COPY_KINDS: dict[Direction, SyncKind] = {
    "device-to-host": "d2h-copy", "host-to-device": "h2d-copy", "device-to-device": "d2d-copy",
}  # fmt: skip


class SyncPoint(msgspec.Struct, frozen=True):
    """One place where the host blocked on the device: the waits of one op (or one bare call)."""

    calls: tuple[RuntimeCall, ...]  # the runtime calls it waited in, by start
    cause: str  # the outermost op that caused it, or the runtime call for a bare synchronize
    kind: SyncKind
    direction: Direction  # of the copy it waited for ("none" for a synchronize with no copy)
    location: SourceLocation | None
    gpu_idle_after_us: float  # how long the drained GPU then waited for new work
    gpu_idle_during_us: float = 0.0  # how long the GPU idled while the host waited
    # The copy kept the host until it ran: pageable host memory, or a synchronous copy (what
    # pinned memory with non_blocking=True avoids; trace/blocking.py: host_memory_blocks).
    pageable: bool = False
    # The waits' own ends, by call: a pageable upload waits only until its copy starts.
    ends_us: tuple[float, ...] = ()

    @property
    def ts_us(self) -> float:
        return self.calls[0].ts_us

    @property
    def end_us(self) -> float:
        return self.ends_us[-1] if self.ends_us else self.calls[-1].end_us

    @property
    def idle_range(self) -> tuple[float, float]:
        """Where the GPU's idle is this sync's doing: while the host waited (the queue drained
        and nothing new came) and after, until the next device work (capped)."""
        if self.gpu_idle_during_us <= 0:
            return (self.end_us, self.end_us + min(self.gpu_idle_after_us, IDLE_AFTER_CAP_US))
        return (self.ts_us, self.end_us + min(self.gpu_idle_after_us, IDLE_AFTER_CAP_US))

    @property
    def blocked_us(self) -> float:
        if not self.ends_us:
            return sum(c.dur_us for c in self.calls)
        return sum(end - c.ts_us for c, end in zip(self.calls, self.ends_us, strict=True))


def sync_points(trace: Trace) -> list[SyncPoint]:
    """Every sync point of the trace, by start (`Facts.sync_points`)."""
    cols = gpu_columns(trace)
    groups: dict[object, list[HostWait]] = {}
    chains: dict[object, list[HostOp]] = {}
    for wait in host_waits(trace):
        call = wait.call
        chain = trace.enclosing_ops(call.tid, call.ts_us, call.end_us)
        ops = [o for o in chain if o.kind == "op"]
        key: object = (call.tid, id(ops[0])) if ops else id(call)  # ops live as long as the trace
        groups.setdefault(key, []).append(wait)
        chains[key] = ops
    out = [_point(trace, cols, waits, chains[key]) for key, waits in groups.items()]
    out.sort(key=lambda p: p.ts_us)
    return out


# complex: a sync point's cause, kind and direction are decided together from its ops and copies.
def _point(trace: Trace, cols: GpuColumns, waits: list[HostWait], ops: list[HostOp]) -> SyncPoint:
    calls = tuple(w.call for w in waits)
    ends = tuple(w.end_us for w in waits)
    copies = _copies_waited_for(trace, waits, ops[0] if ops else None)
    direction = _direction(copies)
    pageable = any(host_memory_blocks(c, trace.runtime_call_of(c)) for c in copies)
    aten = [o for o in ops if o.name.startswith(("aten::", "c10d::"))]
    causes = [o for o in aten if o.name in _SYNC_OPS]
    if causes:
        top: HostOp | None = causes[-1]
        kind: SyncKind = _SYNC_OPS[causes[-1].name]
        # The host reads the value these ops produce, whatever the copy says (a writer that
        # records no memcpy kind on the call leaves ROCm's "DtoD" label on it).
        direction = "device-to-host"
    else:
        top = aten[-1] if aten else (ops[-1] if ops else None)
        kind = _COPY_KINDS.get(direction, "other") if top is not None else "synchronize"
    where = trace.user_frame(trace.top_op(top)) if top is not None else None
    cause = top.name if top is not None else calls[0].name
    start, end = calls[0].ts_us, ends[-1]
    ran = cols.busy.covered(start, end)
    # A wait with no device work inside it waited for nothing the trace shows (a graph capture,
    # the driver): the GPU's idle meanwhile is not a drained queue.
    during = max(0.0, end - start - ran) if ran > 0 else 0.0
    idle = _idle_after(cols, start, end)
    return SyncPoint(calls, cause, kind, direction, where, idle, during, pageable, ends)


def _copies_waited_for(trace: Trace, waits: list[HostWait], op: HostOp | None) -> list[GpuEvent]:
    """The copies the waits were for: their own, else those the same op issued (an asynchronous
    memcpy followed by a stream synchronize)."""
    own = [w.copy for w in waits if w.copy is not None]
    if own or op is None:
        return own
    by_correlation = copies_by_correlation(trace)
    calls = _memcpys_within(trace, op)
    found = (by_correlation.get(c.correlation) for c in calls if c.correlation is not None)
    return [c for c in found if c is not None]


def _direction(copies: list[GpuEvent]) -> Direction:
    found = {c.direction for c in copies}
    for raw in ("DtoH", "HtoD", "DtoD"):  # a device-to-host copy is what a host waits for
        if raw in found:
            return _DIRECTIONS[raw]  # type: ignore[index]
    return "none"


def _memcpys_within(trace: Trace, op: HostOp) -> list[RuntimeCall]:
    """The memcpy calls the op's thread made while inside the op."""
    calls = _memcpys_by_tid(trace).get(op.tid, [])
    i = bisect_left(calls, op.ts_us, key=_TS)
    j = bisect_right(calls, op.end_us, key=_TS)
    return calls[i:j]


@per_trace
def _memcpys_by_tid(trace: Trace) -> dict[int, list[RuntimeCall]]:
    by_tid: dict[int, list[RuntimeCall]] = {}
    for call in trace.runtime_of_kind("memcpy"):  # by start, so each list is sorted
        by_tid.setdefault(call.tid, []).append(call)
    return by_tid


def _idle_after(cols: GpuColumns, start: float, end: float) -> float:
    """GPU idle from the last wait's end to the next device work, if the waits drained the GPU.

    The wait caused the idle only when the GPU was busy while the host waited (it drained the
    queue); if the GPU was idle already, something else starved it.
    """
    busy = cols.busy
    i, nxt = busy.next_start(end)
    if i == 0:
        return 0.0
    last_end = busy.ends[i - 1]
    if last_end > end or last_end < start - 1.0:
        return 0.0  # still busy after the sync, or idle already before it
    return (nxt if nxt is not None else end) - end


def slow_scalar_reads(trace: Trace, min_us: float = SLOW_SCALAR_READ_US) -> list[HostOp]:
    """Outermost scalar reads (`.item()`, `if tensor:`) that took `min_us` or longer, by start.

    On a trace without device activity they are the only sign of a sync: no runtime call was
    recorded, but a read that long waited for the device to finish what it was queued."""
    reads = [o for o in trace.ops_named(SCALAR_READ_KINDS) if o.dur_us >= min_us]
    outer: list[HostOp] = []
    for op in reads:  # aten::item holds aten::_local_scalar_dense: count the read once
        if outer and op.tid == outer[-1].tid and op.ts_us < outer[-1].end_us:
            continue
        outer.append(op)
    return outer
