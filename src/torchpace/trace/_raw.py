"""The on-disk shape of a Kineto Chrome trace, decoded with msgspec straight into typed structs.

Only the fields the engine reads are declared; msgspec skips every other key without building it,
which is what keeps a 54 MB trace under a second. Field types are deliberately lenient (unions with
str) because Kineto versions disagree on them (ROCm writes `"stream": "0x0"`, `"kind": "1"`).
"""

from __future__ import annotations

import msgspec

# Ids are ints; some writers emit them as strings ("0x0", "7") or floats (12.0).
IntLike = int | float | str | None


class RawArgs(msgspec.Struct, gc=False):
    """The `args` object of one event (every vintage's spelling of the fields we read)."""

    external_id: IntLike = msgspec.field(default=None, name="External id")
    external_id_old: IntLike = msgspec.field(default=None, name="external id")  # torch 1.9
    correlation: IntLike = None
    device: IntLike = None
    stream: IntLike = None
    bytes: float | None = None  # memcpy / memset payload
    memory_bytes: float | None = msgspec.field(default=None, name="Bytes")  # [memory] instants
    total_allocated: float | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: float | None = msgspec.field(default=None, name="Total Reserved")
    device_id: IntLike = msgspec.field(default=None, name="Device Id")
    device_type: IntLike = msgspec.field(default=None, name="Device Type")
    sync_kind: str | None = msgspec.field(default=None, name="cuda_sync_kind")
    kind: IntLike = None  # ROCm: "HtoD" on copies, "1" on hipMemcpy* runtime calls
    size: IntLike = None  # ROCm hipMemcpy* runtime calls
    # Kept undecoded (an empty Raw when absent) until a rule asks for shapes.
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    call_stack: str | None = msgspec.field(default=None, name="Call stack")  # torch <= 1.10
    name: str | None = None  # metadata events: process_name / thread_name
    sequence_number: IntLike = msgspec.field(default=None, name="Sequence number")


class RawEvent(msgspec.Struct, gc=False):
    """One entry of `traceEvents`."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0
    args: RawArgs | None = None


class RawDistributedInfo(msgspec.Struct, gc=False):
    """The `distributedInfo` block written by torch.distributed-aware Kineto."""

    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None


class RawDevice(msgspec.Struct, gc=False):
    """One entry of `deviceProperties`."""

    id: int = 0
    name: str = ""
    totalGlobalMem: int | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None


class RawTrace(msgspec.Struct, gc=False):
    """The top-level object of a trace file."""

    traceEvents: list[RawEvent] | None = None
    deviceProperties: list[RawDevice] | None = None
    distributedInfo: RawDistributedInfo | None = None
    displayTimeUnit: str | None = None
    record_shapes: int | bool | None = None
    profile_memory: int | bool | None = None
    traceName: str | None = None


DECODER = msgspec.json.Decoder(RawTrace)


def as_int(value: IntLike) -> int | None:
    """An id-like field as an int (accepts "7", "0x1f"); None when absent or not a number."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    try:
        return int(value, 0)
    except ValueError:
        return None
