"""Typed events of a normalised trace: what rules query. Times are microseconds (`_us`).

Every vintage (torch 1.9 `Operator`/`Kernel` categories to torch 2.x `cpu_op`/`kernel`, CUDA and
ROCm) is normalised into these few types; rules never see raw JSON.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from operator import itemgetter, le
from typing import Any, Literal

import msgspec

# How events travel between the processes of a parallel decode: positional, defaults left out.
_WIRE = {"array_like": True, "omit_defaults": True}

HostKind = Literal["op", "annotation"]
RuntimeKind = Literal["launch", "malloc", "free", "sync", "memcpy", "memset", "event", "other"]
CopyDirection = Literal["HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "unknown"]
# Where copied memory lives: "Host" is ROCm's word for host memory of unknown pinning.
MemoryKind = Literal["Pageable", "Pinned", "Device", "Host", "Managed", "Array", "unknown"]
GpuKind = Literal["kernel", "memcpy", "memset"]
KernelClassName = Literal[
    "gemm", "conv", "attention", "elementwise", "reduction", "communication", "copy", "other"
]


class HostOp(msgspec.Struct, frozen=True, gc=False, **_WIRE):
    """A host-side range: an aten op (`cpu_op`/`Operator`) or a `record_function` annotation."""

    name: str
    kind: HostKind
    ts_us: float
    dur_us: float
    pid: int
    tid: int
    external_id: int | None
    # JSON text, decoded on demand (record_shapes=True): see shapes(). Bytes, not msgspec.Raw,
    # so the events can travel between processes as msgpack.
    input_dims: bytes | None = None
    input_types: bytes | None = None
    call_stack: str | None = None  # torch <= 1.10 with_stack=True: "file(line): fn;..."

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us

    def shapes(self) -> list[list[int]] | None:
        """Input shapes when the trace recorded them (record_shapes=True), else None."""
        if self.input_dims is None:
            return None
        dims = msgspec.json.decode(self.input_dims)
        return [d if isinstance(d, list) else [] for d in dims] if isinstance(dims, list) else None

    def types(self) -> list[str] | None:
        """Input dtypes ("float", "c10::Half", "Scalar", "") when recorded, else None."""
        if self.input_types is None:
            return None
        types = msgspec.json.decode(self.input_types)
        return [str(t) for t in types] if isinstance(types, list) else None


class PythonFrame(msgspec.Struct, frozen=True, gc=False, **_WIRE):
    """A `python_function` range (with_stack=True): `file(line): function` on one thread."""

    name: str
    ts_us: float
    dur_us: float
    tid: int

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


class RuntimeCall(msgspec.Struct, frozen=True, gc=False, **_WIRE):
    """A CUDA/HIP runtime or driver API call on a host thread (cudaLaunchKernel, cudaMalloc...)."""

    name: str
    kind: RuntimeKind
    ts_us: float
    dur_us: float
    tid: int
    correlation: int | None
    external_id: int | None
    # A memcpy call's own direction (its cudaMemcpyKind/hipMemcpyKind argument, which ROCm
    # records): ROCm labels the device activity of a hipMemcpyWithStream(DeviceToHost) "DtoD".
    copy_kind: CopyDirection | None = None

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


class GpuEvent(msgspec.Struct, frozen=True, gc=False, **_WIRE):
    """Work on a device stream: a kernel, a memcpy or a memset.

    `direction`, `src_kind`, `dst_kind` are set for memcpys; `bytes` for memcpys and memsets;
    `klass` for kernels (gemm, conv, attention, elementwise, reduction, communication, copy, other).
    `blocks_per_sm` (thread blocks / SMs) and `occupancy_pct` (CUPTI's estimated achieved
    occupancy, 0-100) for kernels of traces that record them (NVIDIA), else None.
    """

    name: str
    kind: GpuKind
    ts_us: float
    dur_us: float
    device: int
    stream: int
    correlation: int | None
    external_id: int | None
    bytes: int | None = None
    direction: CopyDirection | None = None
    src_kind: MemoryKind | None = None
    dst_kind: MemoryKind | None = None
    klass: KernelClassName | None = None
    blocks_per_sm: float | None = None
    occupancy_pct: float | None = None

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


class SyncEvent(msgspec.Struct, frozen=True, gc=False, **_WIRE):
    """A `cuda_sync` activity: the host blocked on a stream, event or the whole context."""

    sync_kind: str  # "Stream Sync", "Event Sync", "Context Sync", "Stream Wait Event"
    ts_us: float
    dur_us: float
    stream: int | None
    correlation: int | None
    external_id: int | None

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


class Step(msgspec.Struct, frozen=True, gc=False):
    """One training step: a `ProfilerStep#N` range, an iteration inferred from the loop's markers,
    or the whole trace when it has neither (torchpace.trace.iterations).

    `warmup` says why the step is warm-up or a one-off phase (first iteration, CUDA graph capture,
    cuDNN autotuning...) rather than steady state; "" for a steady step (torchpace.trace.warmup).
    """

    index: int
    ts_us: float
    dur_us: float
    warmup: str = ""

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


class MemoryTimeline(msgspec.Struct, array_like=True, gc=False):
    """The `[memory]` instants as columns, sorted by time: one row per allocation (+bytes) or
    free (-bytes).

    Plain lists (the engine needs no numpy: `analyze` starts faster without it).
    `total_allocated`/`total_reserved` are NaN in traces that do not record them (torch <= 1.10).
    `device_type` follows c10::DeviceType (0 CPU, 1 CUDA; ROCm also reports 1).
    """

    ts_us: list[float]
    bytes: list[float]
    total_allocated: list[float]
    total_reserved: list[float]
    device_type: list[int]
    device_id: list[int]
    addr: list[int]  # the block's address (-1 where unrecorded): pairs a free with its allocation
    tid: list[int]  # the allocating thread (-1 where not a number)

    def __len__(self) -> int:
        return len(self.ts_us)

    def in_time_order(self) -> MemoryTimeline:
        """The rows sorted by time (stable: ties keep file order); itself when already sorted."""
        ts = self.ts_us
        if all(map(le, ts, itertools.islice(ts, 1, None))):  # pairs compared in C
            return self
        return self.select(sorted(range(len(ts)), key=ts.__getitem__))

    def select(self, rows: Iterable[int]) -> MemoryTimeline:
        """The rows at these positions, in this order."""
        picked = list(rows)
        if len(picked) < 2:  # itemgetter of one index gives the item, not a tuple
            return MemoryTimeline(*([column[i] for i in picked] for column in self.columns()))  # type: ignore[arg-type]
        get = itemgetter(*picked)  # gathers in C: 28k rows x 6 columns in about a millisecond
        return MemoryTimeline(*(list(get(c)) for c in self.columns()))  # type: ignore[arg-type]

    def columns(self) -> tuple[list[Any], ...]:
        """Every column, in field order."""
        return (
            self.ts_us,
            self.bytes,
            self.total_allocated,
            self.total_reserved,
            self.device_type,
            self.device_id,
            self.addr,
            self.tid,
        )

    def on_device(self) -> MemoryTimeline:
        """Only accelerator memory (device_type != CPU)."""
        if 0 not in self.device_type:
            return self
        return self.where([kind != 0 for kind in self.device_type])

    def where(self, mask: list[bool]) -> MemoryTimeline:
        """The rows where `mask` is true, in order (a filter in C per column: faster than
        select() when most rows stay); itself when every row stays (one device's timeline)."""
        if all(mask):
            return self
        columns: list[list[Any]] = [list(itertools.compress(c, mask)) for c in self.columns()]
        return MemoryTimeline(*columns)


@dataclass(frozen=True)
class DeviceProperties:
    """One entry of the trace's `deviceProperties`."""

    id: int
    name: str
    total_memory_bytes: int | None
    compute_capability: tuple[int, int] | None
    sm_count: int | None = None  # streaming multiprocessors (compute units on AMD)
