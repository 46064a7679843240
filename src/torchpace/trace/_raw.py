"""The on-disk shape of a Kineto Chrome trace, decoded with msgspec straight into typed structs.

Only the fields the engine reads are declared; msgspec skips every other key without building it,
which is what keeps a 54 MB trace under a second. Events are a union tagged by their phase `ph`:
complete ranges (`X`) and instants (`i`/`I`) get the fields the engine reads, every other phase of
the Chrome trace format (flow arrows, metadata, counters...) decodes to an empty struct. A third
of a GPU trace's events are flow arrows: not building their names, times and ids saves a fifth of
the decode. Field types are lenient (unions with str) where Kineto versions disagree on them
(ROCm writes `"stream": "0x0"`, `"kind": "1"`, and since ROCm 6.4 `"bytes": "1"`).

Otherwise the schema is strict: a range needs a `ts` and a `dur` that is neither negative nor
longer than a day, an instant a `ts`. A document with anything else (a phase outside the format, a
field of another type, an impossible duration, invalid UTF-8) is decoded by torchpace.trace.tolerant instead, field by field
against these same structs, which notes what it had to drop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar

import msgspec

# Ids are ints; some writers emit them as strings ("0x0", "7") or floats (12.0).
IntLike = int | float | str | None
# The longest range read as real: a day, in microseconds. The longest in 87 recorded traces here
# is 16 s; a profiler that kept one range open a day would not have written the file. A longer
# (1e297 us) or infinite one is a corrupt or forged figure that would swamp every median.
MAX_DURATION_US = 86_400e6
# A range's duration: a negative or absurd one cannot be measured (the tolerant decoder drops the
# range and says so).
Duration = Annotated[float, msgspec.Meta(ge=0, le=MAX_DURATION_US)]


class RawArgs(msgspec.Struct, gc=False):
    """The `args` of a complete (`X`) event: every vintage's spelling of the fields we read."""

    external_id: IntLike = msgspec.field(default=None, name="External id")
    external_id_old: IntLike = msgspec.field(default=None, name="external id")  # torch 1.9
    correlation: IntLike = None
    device: IntLike = None
    stream: IntLike = None
    bytes: float | str | None = None  # memcpy / memset payload; ROCm >= 6.4 writes "1"
    sync_kind: str | None = msgspec.field(default=None, name="cuda_sync_kind")
    kind: IntLike = None  # ROCm: "HtoD" on copies, "1" on hipMemcpy* runtime calls
    size: IntLike = None  # ROCm hipMemcpy* runtime calls
    # Kept undecoded (an empty Raw when absent) until a rule asks for shapes.
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    call_stack: str | None = msgspec.field(default=None, name="Call stack")  # torch <= 1.10
    # Kernels' launch shape, as CUPTI gives it through Kineto (NVIDIA only; torch 1.8 wrote no
    # `blocks per SM`, only `warps per SM`): the estimated SM efficiency and occupancy.
    blocks_per_sm: float | str | None = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: float | str | None = msgspec.field(default=None, name="warps per SM")
    occupancy_pct: float | str | None = msgspec.field(
        default=None, name="est. achieved occupancy %"
    )
    # Threads per block [x, y, z]; decoded as plain values (a Raw would pin the whole document).
    block: list[int | float | str] | None = None


class MemoryArgs(msgspec.Struct, gc=False):
    """The `args` of a `[memory]` instant: one allocation (+bytes) or free (-bytes)."""

    memory_bytes: float | None = msgspec.field(default=None, name="Bytes")
    total_allocated: float | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: float | None = msgspec.field(default=None, name="Total Reserved")
    device_id: IntLike = msgspec.field(default=None, name="Device Id")
    device_type: IntLike = msgspec.field(default=None, name="Device Type")
    # The block's address: pairs an allocation with its free (the memory view's live blocks).
    addr: IntLike = msgspec.field(default=None, name="Addr")


class Complete(msgspec.Struct, gc=False, tag_field="ph", tag="X", kw_only=True):
    """A range with a duration: ops, annotations, kernels, copies, runtime calls..."""

    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float  # required: a range without a start or a duration cannot be placed or measured
    dur: Duration
    args: RawArgs | None = None


class Instant(msgspec.Struct, gc=False, tag_field="ph", tag="i", kw_only=True):
    """A thread-scoped instant: `[memory]` events, markers."""

    name: str = ""
    cat: str = ""
    tid: int | str = 0  # the thread that allocated: its ops and Python frames say where
    ts: float
    args: MemoryArgs | None = None


class GlobalInstant(Instant, tag="I"):
    """The same instant written with the older capital `I`."""


# The Chrome trace format's other phases: nothing the engine reads. `cat` is a class attribute
# no category spells, so one pass can group every event by category.
OTHER = "\x00other"
_OTHER_PHASES = "BEbnestfPNODMVvRCc()"
_OTHERS = tuple(
    msgspec.defstruct(
        f"Other_{i}",
        [],
        namespace={"cat": OTHER, "__annotations__": {"cat": ClassVar[str]}},
        tag_field="ph",
        tag=ph,
        gc=False,
    )
    for i, ph in enumerate(_OTHER_PHASES)
)

RawEvent = Complete | Instant
# The category given to the host ranges of a pre-Kineto trace, which wrote none (see tolerant.py).
LEGACY_HOST_CAT = "legacy_cpu_op"


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
    numSms: int | None = None


class RawHeader(msgspec.Struct, gc=False):
    """The top-level keys of a trace file other than its events."""

    deviceProperties: list[RawDevice] | None = None
    distributedInfo: RawDistributedInfo | None = None
    displayTimeUnit: str | None = None
    record_shapes: int | bool | None = None
    profile_memory: int | bool | None = None
    traceName: str | None = None


def _with_events(name: str, event: object) -> type[RawHeader]:
    fields = [("traceEvents", list[event] | None, None)]  # type: ignore[valid-type]
    return msgspec.defstruct(name, fields, bases=(RawHeader,), gc=False)  # type: ignore[return-value]


EVENT: object = Complete | Instant | GlobalInstant
for _other in _OTHERS:
    EVENT = EVENT | _other  # type: ignore[operator]
FAST_DECODER = msgspec.json.Decoder(_with_events("Trace", EVENT))
# The phases the format defines, and the struct each decodes to.
PHASES: dict[str, type] = {"X": Complete, "i": Instant, "I": GlobalInstant}
PHASES.update(zip(_OTHER_PHASES, _OTHERS, strict=True))
# A chunk of a document cut for parallel decoding (torchpace.trace.parallel) holds its share of
# the events under CHUNK_KEY: a `traceEvents` key in a chunk is a second list in the document.
CHUNK_KEY = "torchpace:chunk"
if TYPE_CHECKING:

    class Chunk(RawHeader):
        """What a chunk decodes to (the struct is made below: its event type is built above)."""

        traceEvents: msgspec.Raw = msgspec.Raw()  # empty unless the document has a second list
        events: list[RawEvent] | None = None
else:
    Chunk = msgspec.defstruct(
        "Chunk",
        [("traceEvents", msgspec.Raw, msgspec.Raw()), ("events", list[EVENT] | None, None)],
        bases=(RawHeader,),
        rename={"events": CHUNK_KEY},
        gc=False,
    )
CHUNK_DECODER = msgspec.json.Decoder(Chunk)


def split(doc: RawHeader) -> tuple[RawHeader, list[RawEvent] | None]:
    """A decoded document as (its header keys, its events); events None when it has no list.

    Events from the fast decoder include structs of the skipped phases (only a `cat` of OTHER).
    """
    header = RawHeader(**{f: getattr(doc, f) for f in RawHeader.__struct_fields__})
    events: list[RawEvent] | None = getattr(doc, "traceEvents", None)
    return header, events


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
