"""One rank's recorded events and the lookups over them, before any step is judged.

`Trace` (model.py) adds what is derived from the steps (the breakdown, the typical steps); the
modules that compute those take a `Recording`, so none of them depends back on `Trace`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import cached_property, wraps
from itertools import compress
from operator import attrgetter
from typing import TypeVar

from torchpace.trace.events import (
    DeviceProperties,
    GpuEvent,
    HostOp,
    MemoryTimeline,
    PythonFrame,
    RuntimeCall,
    Step,
    SyncEvent,
)
from torchpace.trace.names import LOOP_MARKERS, REGION_MARKER
from torchpace.trace.nesting import Containing, Nesting
from torchpace.trace.stacks import SourceLocation, user_location
from torchpace.trace.summary import TraceInfo

R = TypeVar("R", bound="Recording")
T = TypeVar("T")
_NAME = attrgetter("name")


def per_trace(compute: Callable[[R], T]) -> Callable[[R], T]:
    """`compute(trace)` run once per trace and kept with it: the views other modules derive."""
    key = f"{compute.__module__}.{compute.__qualname__}"

    @wraps(compute)
    def cached(trace: R) -> T:
        if key not in trace._cache:
            trace._cache[key] = compute(trace)
        return trace._cache[key]  # type: ignore[return-value]

    return cached


@dataclass(frozen=True)
class Recording:
    """One rank's trace, normalised: typed events sorted by start, steps, header facts.

    `torchpace.trace.load_trace` builds it as a `Trace`. Lists are sorted by `ts_us`; GPU lists
    hold kernels, copies and memsets of every stream. Derived views (indexes, nesting, the
    `per_trace` ones of other modules) are computed on first use and cached.
    """

    info: TraceInfo
    steps: tuple[Step, ...]
    host_ops: list[HostOp]  # cpu_op / Operator and user_annotation ranges, every thread
    python_frames: list[PythonFrame]  # python_function ranges (with_stack=True)
    runtime: list[RuntimeCall]  # cuda_runtime / cuda_driver / Runtime calls
    kernels: list[GpuEvent]
    copies: list[GpuEvent]  # memcpys with direction, memory kinds and bytes
    memsets: list[GpuEvent]
    syncs: list[SyncEvent]  # cuda_sync activities (torch >= 2.1 with CUPTI sync tracing)
    gpu_annotations: list[GpuEvent]  # gpu_user_annotation ranges (kind "kernel", klass None)
    memory: MemoryTimeline
    devices: tuple[DeviceProperties, ...]
    main_tid: int  # the thread that runs the training loop (holds ProfilerStep#)
    _cache: dict[str, object] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def gpu_events(self) -> list[GpuEvent]:
        """Kernels, copies and memsets of every stream, sorted by start."""
        return sorted([*self.kernels, *self.copies, *self.memsets], key=lambda g: g.ts_us)

    @property
    def has_gpu(self) -> bool:
        """Whether the trace recorded device activity (kernels, copies or memsets)."""
        return bool(self.kernels or self.copies or self.memsets)

    def ops_named(self, names: Collection[str], *, tid: int | None = None) -> list[HostOp]:
        """Host ops whose name is one of `names` (optionally on one thread), by start."""
        ops = self.ops_where_name(set(names).__contains__)
        return ops if tid is None else [o for o in ops if o.tid == tid]

    def ops_matching(self, pattern: str | re.Pattern[str]) -> list[HostOp]:
        """Host ops whose name matches the regular expression (re.match), by start."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        return self.ops_where_name(rx.match)

    def ops_where_name(self, keep: Callable[[str], object]) -> list[HostOp]:
        """Host ops whose name `keep` accepts, by start: asked once per distinct name (a few
        hundred among 10^5 ops), the ops then picked in C."""
        wanted = {name for name in self.op_names if keep(name)}
        if not wanted:
            return []
        ops = self.host_ops
        return list(compress(ops, map(wanted.__contains__, map(_NAME, ops))))

    @cached_property
    def op_names(self) -> frozenset[str]:
        """The distinct names of the host ops."""
        return frozenset(map(_NAME, self.host_ops))

    def runtime_of_kind(self, *kinds: str) -> list[RuntimeCall]:
        """Runtime calls of the given kinds ("malloc", "free", "sync", "launch", ...), by start."""
        if "launch" in kinds:
            return [r for r in self.runtime if r.kind in kinds]
        by_kind = self._runtime_by_kind
        if len(kinds) == 1:
            return list(by_kind.get(kinds[0], ()))
        return sorted((r for k in kinds for r in by_kind.get(k, ())), key=lambda r: r.ts_us)

    @cached_property
    def _runtime_by_kind(self) -> dict[str, list[RuntimeCall]]:
        # Launches are most calls and no rule asks for them by kind: leave them out of the index
        # (a filter in C first, then a Python loop over the few thousand others).
        out: dict[str, list[RuntimeCall]] = {}
        for r in [r for r in self.runtime if r.kind != "launch"]:
            out.setdefault(r.kind, []).append(r)
        return out

    def step_at(self, ts_us: float) -> Step | None:
        """The step whose range holds the timestamp, or None."""
        i = bisect_right(self._step_starts, ts_us) - 1
        return self.steps[i] if i >= 0 and ts_us <= self.steps[i].end_us else None

    @cached_property
    def _step_starts(self) -> list[float]:
        return [s.ts_us for s in self.steps]

    @cached_property
    def _runtime_by_correlation(self) -> dict[int, RuntimeCall]:
        return {r.correlation: r for r in self.runtime if r.correlation is not None}

    @cached_property
    def _others_by_correlation(self) -> dict[int, RuntimeCall]:
        # Copies, memsets and syncs come from memcpy/memset/sync calls, never from launches: a
        # dict of those few thousand calls spares building one of every call (~4 ms).
        calls = (r for rs in self._runtime_by_kind.values() for r in rs)
        return {r.correlation: r for r in calls if r.correlation is not None}

    @cached_property
    def _runtime_by_external(self) -> dict[int, RuntimeCall]:
        # Older ROCm writers give kernels and their launches no correlation, only an External id
        # they share (the flow arrow's id): the link of last resort.
        return {
            r.external_id: r
            for r in self.runtime
            if r.correlation is None and r.external_id is not None
        }

    def runtime_call_of(self, gpu: GpuEvent | SyncEvent) -> RuntimeCall | None:
        """The runtime call (cudaLaunchKernel, cudaMemcpyAsync...) that issued this device work.

        By correlation id; by External id when the trace gives the device work none.
        """
        if gpu.correlation is None:
            if gpu.external_id is None:
                return None
            return self._runtime_by_external.get(gpu.external_id)
        if isinstance(gpu, SyncEvent) or gpu.kind != "kernel":
            found = self._others_by_correlation.get(gpu.correlation)
            if found is not None:
                return found
        return self._runtime_by_correlation.get(gpu.correlation)

    @cached_property
    def _ops_by_tid(self) -> dict[int, list[HostOp]]:
        # A filter per thread runs in C; a trace has a handful of threads, not thousands.
        ops = self.host_ops
        tids = {o.tid for o in ops}
        if len(tids) > 16:
            out: dict[int, list[HostOp]] = {}
            for op in ops:
                out.setdefault(op.tid, []).append(op)
            return out
        return {tid: [o for o in ops if o.tid == tid] for tid in tids}

    @cached_property
    def device_memory(self) -> MemoryTimeline:
        """The memory events of accelerators (not the CPU), by time."""
        return self.memory.on_device()

    def host_tids(self) -> list[int]:
        """The threads that recorded host ops."""
        return list(self._ops_by_tid)

    def ops_on(self, tid: int) -> list[HostOp]:
        """Host ops (and annotations) of one thread, by start."""
        return self._ops_by_tid.get(tid, [])

    def _nesting(self, tid: int, *, python: bool = False) -> Nesting:
        """Host ops (or, `python`, Python frames) of one thread as a Nesting (cached)."""
        key = f"{'py' if python else 'nest'}:{tid}"
        if key not in self._cache:
            mine = [f for f in self.python_frames if f.tid == tid] if python else self.ops_on(tid)
            self._cache[key] = Nesting(mine)
        return self._cache[key]  # type: ignore[return-value]

    def enclosing_ops(self, tid: int, ts_us: float, end_us: float) -> list[HostOp]:
        """Host ops on thread `tid` that contain [ts_us, end_us], innermost first."""
        key = f"queries:{tid}"
        queries = self._cache[key] = int(self._cache.get(key, 0)) + 1  # type: ignore[call-overload]
        if queries <= _SCAN_QUERIES:
            scan = self._containing(tid)
            return [scan.items[i] for i in scan.containing(ts_us, end_us)]  # type: ignore[misc]
        nest = self._nesting(tid)
        return [nest.items[i] for i in nest.chain(ts_us, end_us)]  # type: ignore[misc]

    def _containing(self, tid: int) -> Containing:
        key = f"containing:{tid}"
        if key not in self._cache:
            self._cache[key] = Containing(self._ops_by_tid.get(tid, []))
        return self._cache[key]  # type: ignore[return-value]

    def launcher(self, gpu: GpuEvent | SyncEvent) -> HostOp | None:
        """The innermost host op (e.g. aten::copy_) whose runtime call issued this device work.

        Without a runtime call to go by, the op that shares the work's External id (Kineto gives
        a kernel the External id of the op that launched it).
        """
        call = self.runtime_call_of(gpu)
        if call is None:
            return self._ops_by_external.get(gpu.external_id) if gpu.external_id else None
        ops = self.enclosing_ops(call.tid, call.ts_us, call.end_us)
        return ops[0] if ops else None

    @cached_property
    def _ops_by_external(self) -> dict[int, HostOp]:
        # The innermost op of an External id is the last to start (ops are sorted by start).
        return {o.external_id: o for o in self.host_ops if o.kind == "op" and o.external_id}

    def top_op(self, op: HostOp) -> HostOp:
        """The outermost aten op enclosing `op` on its thread (annotations are skipped)."""
        chain = self.enclosing_ops(op.tid, op.ts_us, op.end_us)
        ops = [o for o in chain if o.kind == "op" and not _is_marker(o.name)]
        return ops[-1] if ops else op

    def user_frame(self, op: HostOp) -> SourceLocation | None:
        """Where in the user's code `op` was called (skips torch and site-packages frames).

        Needs stacks: with_stack=True (python_function events, or the "Call stack" argument of
        torch <= 1.10 traces). None when the trace has none for this op.
        """
        if op.call_stack:
            return user_location(op.call_stack.split(";"))
        if not self.python_frames:
            return None
        nest = self._nesting(op.tid, python=True)
        frames = [nest.items[i].name for i in nest.chain(op.ts_us, op.end_us)]  # type: ignore[attr-defined]
        return user_location(frames)

    @property
    def has_stacks(self) -> bool:
        """Whether the trace maps ops to Python source lines (with_stack=True)."""
        return bool(self.python_frames) or any(o.call_stack for o in self.host_ops[:2000])


# Answer the first queries of a thread by a scan of the ranges near each (Containing); build its
# Nesting (a Python pass over every op of the thread) only for a thread queried more often.
_SCAN_QUERIES = 64


_MARKERS = (*LOOP_MARKERS, REGION_MARKER)


def _is_marker(name: str) -> bool:
    return name.startswith(_MARKERS)
