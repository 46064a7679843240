"""Raw events -> typed events: one pass that sorts events by category, then one builder per kind.

Category names per vintage (torch 1.9 -> 2.x):
  host ops      Operator -> cpu_op;  annotations: user_annotation (1.9 wrote them as Operator)
  kernels       Kernel -> kernel;    copies Memcpy -> gpu_memcpy;  memsets Memset -> gpu_memset
  runtime       Runtime -> cuda_runtime, cuda_driver (hip* names on ROCm)
  memory        `[memory]` instants: no category (1.9) -> cpu_instant_event
Before Kineto (torch < 1.8) a trace was a bare list of host ranges without a category: the decoder
gives them LEGACY_HOST_CAT (torchpace.trace.tolerant).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from operator import attrgetter

import msgspec

from torchpace.trace._raw import (
    LEGACY_HOST_CAT,
    OTHER,
    Complete,
    Instant,
    RawArgs,
    RawEvent,
    as_int,
)
from torchpace.trace.events import (
    CopyDirection,
    GpuEvent,
    HostKind,
    HostOp,
    MemoryKind,
    MemoryTimeline,
    PythonFrame,
    RuntimeCall,
    RuntimeKind,
    SyncEvent,
)
from torchpace.trace.kernels import classify_kernel

HOST_OP_CATS = frozenset({"cpu_op", "Operator", "operator", LEGACY_HOST_CAT})
ANNOTATION_CATS = frozenset({"user_annotation"})
PYTHON_CATS = frozenset({"python_function"})
KERNEL_CATS = frozenset({"kernel", "Kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "Memset"})
RUNTIME_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver", "Driver"})
SYNC_CATS = frozenset({"cuda_sync"})
GPU_ANNOTATION_CATS = frozenset({"gpu_user_annotation"})
# Known and deliberately unused: flow arrows, profiler spans, overhead markers.
IGNORED_CATS = frozenset(
    {"ac2g", "fwdbwd", "async", "Trace", "cuda_profiler_range", "Overhead", "overhead", ""}
)
MEMORY_CATS = frozenset({"cpu_instant_event", "Memory", "memory", ""})

_RUNTIME_KINDS: tuple[tuple[re.Pattern[str], RuntimeKind], ...] = (
    (re.compile(r"^(cuda|hip|cu|hipExt|hipModule)\w*Launch"), "launch"),
    (
        re.compile(r"^(cudaMalloc(Async)?|cuMemAlloc\w*|hipMalloc(Async)?|hipExtMalloc\w*)$"),
        "malloc",
    ),
    (re.compile(r"^(cudaFree(Async)?|cuMemFree\w*|hipFree(Async)?)$"), "free"),
    (re.compile(r"^(cuda|hip|cu)(Stream|Device|Event|Ctx)Synchronize"), "sync"),
    (re.compile(r"^(cuda|hip|cu)Memcpy"), "memcpy"),
    (re.compile(r"^(cuda|hip|cu)Memset"), "memset"),
    (re.compile(r"^(cuda|hip|cu)(Event|StreamWaitEvent)"), "event"),
)
_COPY_NAME = re.compile(r"Memcpy (\w+)(?: \((\w+) -> (\w+)\))?")
_DIRECTIONS: frozenset[str] = frozenset({"HtoD", "DtoH", "DtoD", "HtoH", "PtoP"})
_MEMORY_KINDS: frozenset[str] = frozenset(
    {"Pageable", "Pinned", "Device", "Host", "Managed", "Array"}
)
_STREAM_TID = re.compile(r"(\d+)\s*$")


class Buckets(msgspec.Struct):
    """Raw events grouped by what they are, plus what was left out."""

    host: list[Complete] = msgspec.field(default_factory=list)
    python: list[Complete] = msgspec.field(default_factory=list)
    kernels: list[Complete] = msgspec.field(default_factory=list)
    memcpys: list[Complete] = msgspec.field(default_factory=list)
    memsets: list[Complete] = msgspec.field(default_factory=list)
    runtime: list[Complete] = msgspec.field(default_factory=list)
    syncs: list[Complete] = msgspec.field(default_factory=list)
    gpu_annotations: list[Complete] = msgspec.field(default_factory=list)
    memory: list[Instant] = msgspec.field(default_factory=list)
    unknown: Counter[str] = msgspec.field(default_factory=Counter)
    categories: set[str] = msgspec.field(default_factory=set)


def bucket(events: list[RawEvent]) -> Buckets:
    """Sort events by category in one pass (the only loop over every event)."""
    b = Buckets()
    by_cat: defaultdict[str, list[RawEvent]] = defaultdict(list)
    for e in events:
        by_cat[e.cat].append(e)
    by_cat.pop(OTHER, None)  # flow arrows, metadata...: phases the engine does not read
    targets = (
        (HOST_OP_CATS | ANNOTATION_CATS, b.host),
        (PYTHON_CATS, b.python),
        (KERNEL_CATS, b.kernels),
        (MEMCPY_CATS, b.memcpys),
        (MEMSET_CATS, b.memsets),
        (RUNTIME_CATS, b.runtime),
        (SYNC_CATS, b.syncs),
        (GPU_ANNOTATION_CATS, b.gpu_annotations),
    )
    for cat, group in by_cat.items():
        b.categories.add(cat)
        if cat in MEMORY_CATS:
            b.memory.extend([e for e in group if isinstance(e, Instant) and e.name == "[memory]"])
        for cats, out in targets:
            if cat in cats:
                # A class test, not isinstance: Complete has no subclasses, and this runs 10^5 times.
                out.extend([e for e in group if e.__class__ is Complete])  # type: ignore[misc]
                break
        else:
            if cat not in IGNORED_CATS and cat not in MEMORY_CATS:
                b.unknown[cat] += len(group)
    return b


def _tid(value: int | str) -> int:
    if isinstance(value, int):
        return value
    found = _STREAM_TID.search(value)
    return int(found.group(1)) if found else 0


# The loops below run once per event (hundreds of thousands): ids are almost always ints
# already, so they test the type inline and call as_int/_tid only for the odd string.
_BY_TS = attrgetter("ts")


def host_ops(raw: list[Complete]) -> list[HostOp]:
    """Host ops and annotations, sorted by start time."""
    raw.sort(key=_BY_TS)
    out: list[HostOp] = []
    append = out.append
    for e in raw:
        a = e.args
        kind: HostKind = "annotation" if e.cat in ANNOTATION_CATS else "op"
        pid, tid = e.pid, e.tid
        pid = pid if pid.__class__ is int else _tid(pid)
        tid = tid if tid.__class__ is int else _tid(tid)
        if a is None:
            append(HostOp(e.name, kind, e.ts, e.dur, pid, tid, None))  # type: ignore[arg-type]
            continue
        ext = a.external_id if a.external_id is not None else a.external_id_old
        ext = ext if ext is None or ext.__class__ is int else as_int(ext)
        append(
            HostOp(
                e.name, kind, e.ts, e.dur, pid, tid, ext,  # type: ignore[arg-type]
                bytes(a.input_dims) if a.input_dims else None,
                bytes(a.input_types) if a.input_types else None,
                a.call_stack or None,
            )
        )  # fmt: skip
    return out


def python_frames(raw: list[Complete]) -> list[PythonFrame]:
    """`python_function` ranges sorted by start time."""
    raw.sort(key=_BY_TS)
    return [PythonFrame(e.name, e.ts, e.dur, _tid(e.tid)) for e in raw]


def runtime_kind(name: str) -> RuntimeKind:
    """Classify a runtime/driver API name (CUDA or HIP)."""
    for pattern, kind in _RUNTIME_KINDS:
        if pattern.match(name):
            return kind
    return "other"


# cudaMemcpyKind / hipMemcpyKind, as ROCm writes it on hipMemcpy* calls ("kind": "2").
_MEMCPY_KINDS: dict[int, CopyDirection] = {0: "HtoH", 1: "HtoD", 2: "DtoH", 3: "DtoD"}


def _copy_kind(value: object) -> CopyDirection | None:
    number = value if value.__class__ is int else as_int(value)  # type: ignore[arg-type]
    return _MEMCPY_KINDS.get(number) if number is not None else None


def runtime_calls(raw: list[Complete]) -> list[RuntimeCall]:
    """Runtime and driver calls sorted by start time."""
    kinds: dict[str, RuntimeKind] = {}
    out: list[RuntimeCall] = []
    append = out.append
    raw.sort(key=_BY_TS)
    for e in raw:
        kind = kinds.get(e.name)
        if kind is None:
            kinds[e.name] = kind = runtime_kind(e.name)
        a = e.args
        corr = ext = None
        if a is not None:
            corr = a.correlation
            corr = corr if corr is None or corr.__class__ is int else as_int(corr)
            ext = a.external_id if a.external_id is not None else a.external_id_old
            ext = ext if ext is None or ext.__class__ is int else as_int(ext)
        tid = e.tid
        tid = tid if tid.__class__ is int else _tid(tid)
        if kind == "memcpy" and a is not None and a.kind is not None:
            call = RuntimeCall(e.name, kind, e.ts, e.dur, tid, corr, ext, _copy_kind(a.kind))  # type: ignore[arg-type]
            append(call)
            continue
        append(RuntimeCall(e.name, kind, e.ts, e.dur, tid, corr, ext))  # type: ignore[arg-type]
    return out


def copy_directions(copies: list[GpuEvent], runtime: list[RuntimeCall]) -> list[GpuEvent]:
    """The copies, each with the direction its call asked for where the device activity says
    otherwise: ROCm records a hipMemcpyWithStream(kind=DeviceToHost) as `Memcpy DtoD (Device ->
    Device)` (it copies through a device-visible staging buffer), but the host waits for the data
    on its side."""
    asked = {
        c.correlation: c.copy_kind
        for c in runtime
        if c.copy_kind in ("HtoD", "DtoH") and c.correlation is not None
    }
    if not asked:
        return copies
    out = []
    for copy in copies:
        kind = asked.get(copy.correlation) if copy.correlation is not None else None
        if kind is not None and copy.direction == "DtoD":
            src, dst = ("Host", "Device") if kind == "HtoD" else ("Device", "Host")
            copy = msgspec.structs.replace(copy, direction=kind, src_kind=src, dst_kind=dst)
        out.append(copy)
    return out


def _ids(e: Complete) -> tuple[int, int, int | None, int | None]:
    a = e.args
    if a is None:
        return _tid(e.pid), _tid(e.tid), None, None
    device, stream, corr = a.device, a.stream, a.correlation
    ext = a.external_id if a.external_id is not None else a.external_id_old
    return (
        device
        if device.__class__ is int
        else as_int(device)
        if device is not None
        else _tid(e.pid),  # type: ignore[return-value]
        stream
        if stream.__class__ is int
        else as_int(stream)
        if stream is not None
        else _tid(e.tid),
        corr if corr is None or corr.__class__ is int else as_int(corr),
        ext if ext is None or ext.__class__ is int else as_int(ext),
    )


def kernels(raw: list[Complete]) -> list[GpuEvent]:
    """Kernels with their class (classified once per distinct name), sorted by start."""
    classes: dict[str, str] = {}
    out: list[GpuEvent] = []
    append = out.append
    raw.sort(key=_BY_TS)
    for e in raw:
        klass = classes.get(e.name)
        if klass is None:
            classes[e.name] = klass = classify_kernel(e.name)
        a = e.args
        if a is None:
            append(GpuEvent(e.name, "kernel", e.ts, e.dur, *_ids(e), klass=klass))  # type: ignore[arg-type]
            continue
        # _ids inline where the ids are ints (every CUDA kernel): a call per kernel is 7% of this.
        device, stream, corr = a.device, a.stream, a.correlation
        ext = a.external_id if a.external_id is not None else a.external_id_old
        if device.__class__ is int and stream.__class__ is int and corr.__class__ is int:
            ext = ext if ext is None or ext.__class__ is int else as_int(ext)
        else:
            device, stream, corr, ext = _ids(e)
        blocks, occupancy = a.blocks_per_sm, a.occupancy_pct
        if blocks.__class__ is not float or blocks <= 0:  # type: ignore[operator]
            blocks = _blocks_per_sm(a)
        if occupancy.__class__ is not float or occupancy < 0:  # type: ignore[operator]
            occupancy = _positive(occupancy, zero=True)
        append(
            GpuEvent(
                e.name, "kernel", e.ts, e.dur, device, stream, corr, ext,  # type: ignore[arg-type]
                None, None, None, None, klass, blocks, occupancy,  # type: ignore[arg-type]
            )
        )  # fmt: skip
    return out


def _positive(value: float | str | None, *, zero: bool = False) -> float | None:
    """A launch figure as a float; None when absent, not a number or negative (CUPTI's -1:
    unknown)."""
    if value.__class__ is str:
        try:
            value = float(value)  # type: ignore[arg-type]
        except ValueError:
            return None
    if not isinstance(value, float | int) or value < 0 or (value == 0 and not zero):
        return None
    return float(value)


def _blocks_per_sm(args: RawArgs) -> float | None:
    """`blocks per SM`, or from `warps per SM` and the block's threads (torch 1.8 wrote only
    those): Kineto computes warps per SM as blocks per SM x threads per block / 32."""
    blocks = _positive(args.blocks_per_sm)
    if blocks is not None or args.warps_per_sm is None or not args.block:
        return blocks
    warps = _positive(args.warps_per_sm)
    try:
        threads = math.prod(int(d) for d in args.block)
    except (TypeError, ValueError):
        return None
    return warps * 32 / threads if warps is not None and threads > 0 else None


def copy_kinds(
    name: str, kind: int | float | str | None
) -> tuple[CopyDirection, MemoryKind, MemoryKind]:
    """Direction and memory kinds from `Memcpy HtoD (Pageable -> Device)` (or ROCm's `kind`)."""
    found = _COPY_NAME.search(name)
    direction = found.group(1) if found else (kind if isinstance(kind, str) else "unknown")
    src = found.group(2) if found and found.group(2) else "unknown"
    dst = found.group(3) if found and found.group(3) else "unknown"
    return (
        direction if direction in _DIRECTIONS else "unknown",  # type: ignore[return-value]
        src if src in _MEMORY_KINDS else "unknown",
        dst if dst in _MEMORY_KINDS else "unknown",
    )


def _nbytes(size: float | str | None) -> int | None:
    """A copy's byte count: a number, or a string of one (ROCm >= 6.4 writes "bytes": "1")."""
    if size is None or size.__class__ is str:
        return as_int(size)  # type: ignore[arg-type]
    return int(size)


def transfers(raw: list[Complete], kind: str) -> list[GpuEvent]:
    """Memcpys (with direction and memory kinds) or memsets, with their byte counts, by start."""
    out = []
    raw.sort(key=_BY_TS)
    for e in raw:
        device, stream, corr, ext = _ids(e)
        nbytes = _nbytes(e.args.bytes) if e.args is not None else None
        if kind == "memcpy":
            direction, src, dst = copy_kinds(e.name, e.args.kind if e.args else None)
            out.append(
                GpuEvent(
                    e.name, "memcpy", e.ts, e.dur, device, stream, corr, ext, nbytes,
                    direction, src, dst, "copy",
                )
            )  # fmt: skip
        else:
            out.append(GpuEvent(e.name, "memset", e.ts, e.dur, device, stream, corr, ext, nbytes))
    return out


def syncs(raw: list[Complete]) -> list[SyncEvent]:
    """`cuda_sync` activities sorted by start time."""
    out = []
    for e in sorted(raw, key=lambda e: e.ts):
        _, stream, corr, ext = _ids(e)
        kind = (e.args.sync_kind if e.args else None) or e.name
        out.append(SyncEvent(kind, e.ts, e.dur, stream, corr, ext))
    return out


def _int_or(value: int | str | None, default: int) -> int:
    if value.__class__ is int:
        return value  # type: ignore[return-value]
    number = as_int(value)
    return default if number is None else number


def memory(raw: list[Instant]) -> MemoryTimeline:
    """`[memory]` instants as columns of plain numbers (NaN where a vintage does not record one)."""
    nan = float("nan")
    raw = [e for e in raw if e.args is not None]
    raw.sort(key=_BY_TS)
    args = [e.args for e in raw]

    # Whole columns gathered in C (map + attrgetter); a Python pass only for the odd column
    # with gaps (None) or string ids.
    def column(name: str, default: float) -> list[float]:
        values = list(map(attrgetter(name), args))
        return values if None not in values else [default if v is None else v for v in values]

    def ints(name: str, default: int) -> list[int]:
        values = list(map(attrgetter(name), args))
        if set(map(type, values)) <= {int}:
            return values
        return [_int_or(v, default) for v in values]

    return MemoryTimeline(
        list(map(_BY_TS, raw)),
        column("memory_bytes", nan),
        column("total_allocated", nan),
        column("total_reserved", nan),
        ints("device_type", 0),
        ints("device_id", -1),
        ints("addr", -1),
        [_int_or(e.tid, -1) for e in raw],
    )


def gpu_annotations(raw: list[Complete]) -> list[GpuEvent]:
    """`gpu_user_annotation` ranges (record_function names projected onto a stream)."""
    out = []
    for e in sorted(raw, key=lambda e: e.ts):
        device, stream, corr, ext = _ids(e)
        out.append(GpuEvent(e.name, "kernel", e.ts, e.dur, device, stream, corr, ext))
    return out
