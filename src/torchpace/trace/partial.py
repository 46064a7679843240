"""A decoded piece of a trace (a whole file, or one chunk of its events), normalised.

Pieces are what the parallel loader moves between processes (msgspec encodes them as they are)
and what the Trace is built from: `normalise` turns decoded JSON into one, `merge` joins pieces
cut from the same file back into the piece the whole file would have given.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import msgspec

from torchpace.trace import normalize as norm
from torchpace.trace._raw import RawEvent, RawHeader
from torchpace.trace.events import (
    GpuEvent,
    HostOp,
    MemoryTimeline,
    PythonFrame,
    RuntimeCall,
    SyncEvent,
)

_BY_TS = attrgetter("ts_us")


class Partial(msgspec.Struct, gc=False):
    """Typed events of one piece, each list sorted by start, plus what the header needs."""

    header: RawHeader  # the top-level keys this piece held
    events: int  # raw events decoded (metadata and flow events included)
    host: list[HostOp]
    python: list[PythonFrame]
    runtime: list[RuntimeCall]
    kernels: list[GpuEvent]
    copies: list[GpuEvent]
    memsets: list[GpuEvent]
    syncs: list[SyncEvent]
    gpu_annotations: list[GpuEvent]
    memory: MemoryTimeline  # sorted by time within the piece
    unknown: dict[str, int]  # events of categories the engine does not know, by category
    categories: list[str]
    notes: list[str] = msgspec.field(default_factory=list)  # what the decoder could not read


def normalise(events: list[RawEvent], header: RawHeader, notes: Sequence[str] = ()) -> Partial:
    """Sort a file's (or chunk's) decoded events by category and type them."""
    b = norm.bucket(events)
    return Partial(
        header=header,
        events=len(events),
        host=norm.host_ops(b.host),
        python=norm.python_frames(b.python),
        runtime=norm.runtime_calls(b.runtime),
        kernels=norm.kernels(b.kernels),
        copies=norm.transfers(b.memcpys, "memcpy"),
        memsets=norm.transfers(b.memsets, "memset"),
        syncs=norm.syncs(b.syncs),
        gpu_annotations=norm.gpu_annotations(b.gpu_annotations),
        memory=norm.memory(b.memory),
        unknown=dict(b.unknown),
        categories=sorted(b.categories),
        notes=list(notes),
    )


_EVENT_LISTS = (
    "host",
    "python",
    "runtime",
    "kernels",
    "copies",
    "memsets",
    "syncs",
    "gpu_annotations",
)


def merge(parts: Sequence[Partial]) -> Partial:
    """Join pieces cut from one file, given in file order, into the piece the whole file gives.

    Lists are sorted stably, so events that start together keep their file order, as they do
    when the whole file is normalised at once.
    """
    if len(parts) == 1:
        return parts[0]
    lists: dict[str, Any] = {}
    for name in _EVENT_LISTS:
        lists[name] = _merge_sorted([getattr(p, name) for p in parts])
    unknown: dict[str, int] = {}
    for p in parts:
        for cat, n in p.unknown.items():
            unknown[cat] = unknown.get(cat, 0) + n
    return Partial(
        header=_merge_headers([p.header for p in parts]),
        events=sum(p.events for p in parts),
        memory=_merge_memory([p.memory for p in parts]),
        unknown=unknown,
        categories=sorted({c for p in parts for c in p.categories}),
        notes=list(dict.fromkeys(n for p in parts for n in p.notes)),
        **lists,
    )


def _merge_sorted(runs: list[list[Any]]) -> list[Any]:
    """Sorted runs in file order as one list sorted by start (stable: ties keep file order)."""
    runs = [r for r in runs if r]
    merged = [e for r in runs for e in r]
    # Kineto writes each kind of event in time order: runs usually follow on from each other.
    if any(a[-1].ts_us > b[0].ts_us for a, b in itertools.pairwise(runs)):
        merged.sort(key=_BY_TS)  # timsort merges the runs in about one pass
    return merged


def _merge_memory(pieces: list[MemoryTimeline]) -> MemoryTimeline:
    """Rows of every piece, sorted by time."""
    held = [m for m in pieces if len(m)]
    if len(held) <= 1:
        return held[0] if held else pieces[0]
    columns = zip(*(m.columns() for m in held), strict=True)
    joined = MemoryTimeline(*([v for c in pieces_of for v in c] for pieces_of in columns))
    return joined.in_time_order()


def _merge_headers(headers: list[RawHeader]) -> RawHeader:
    """Each top-level key from the first piece that has it."""
    values = {
        f: next((v for h in headers if (v := getattr(h, f)) is not None), None)
        for f in RawHeader.__struct_fields__
    }
    return RawHeader(**values)
