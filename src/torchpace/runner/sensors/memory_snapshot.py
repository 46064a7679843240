"""Read the CUDA caching allocator's snapshot (`torch.cuda.memory._snapshot()`) into what the
out-of-memory explanation needs: reserved vs allocated, the largest free piece, and the largest live
blocks with the line of the user's code that made each.

The format is torch's documented one (torch/cuda/memory.py, `_snapshot`'s docstring; drawn by
torch/cuda/_memory_viz.py): `segments`, each a cudaMalloc'd range with `total_size`,
`allocated_size` and `blocks`; a block has `size`, `requested_size`, `address`, `state`
("active_allocated", "active_awaiting_free", "inactive") and `frames` (`filename`, `line`, `name`,
innermost first) when history was recorded with stacks. torch 2.0 wrote no block `address` or
`frames`: a block's allocations are in `history` (`addr`, `real_size`, `frames`), the last one live
(tests/fixtures/snapshots/ has a real one of each).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torchpace.trace.stacks import SourceLocation, is_user_file

LARGEST = 10
SITES = 5


@dataclass(frozen=True)
class SnapshotBlock:
    """One live block of the snapshot, and where it was allocated."""

    addr: int
    bytes: int
    where: SourceLocation | None  # the innermost frame of the user's code; None: not recorded
    frames: tuple[str, ...] = ()  # "file:line in fn", innermost first (a few, for the report)


@dataclass(frozen=True)
class SnapshotSummary:
    """What the snapshot says, in totals and the largest live blocks."""

    reserved_bytes: int  # sum of segments' total_size
    allocated_bytes: int  # sum of live blocks (active_allocated)
    awaiting_free_bytes: int  # freed, waiting on another stream
    largest_free_bytes: int  # the largest inactive block: the most one allocation could get
    segments: int
    largest: tuple[SnapshotBlock, ...]  # live blocks, largest first
    # Where the live bytes were made: (the user's frames, innermost first; bytes; blocks), most
    # bytes first. A snapshot of thousands of blocks reads as a few lines of the user's code.
    sites: tuple[tuple[tuple[str, ...], int, int], ...] = ()

    @property
    def fragmentation_bytes(self) -> int:
        """Reserved but not in a live tensor: cached pieces, free for reuse only where they fit."""
        return self.reserved_bytes - self.allocated_bytes


def _where(frames: Sequence[Mapping[str, Any]]) -> tuple[SourceLocation | None, tuple[str, ...]]:
    shown: list[str] = []
    user = None
    for f in frames:
        file, line, name = str(f.get("filename", "?")), int(f.get("line", 0)), str(f.get("name"))
        if user is None and is_user_file(file):
            user = SourceLocation(file, line, name)
        if len(shown) < 4 and is_user_file(file):
            shown.append(f"{file}:{line} in {name}")
    return user, tuple(shown)


def _blocks(seg: Mapping[str, Any]) -> Iterator[tuple[int, int, str, Sequence[Mapping[str, Any]]]]:
    """(address, size, state, frames) of a segment's blocks, in either format."""
    addr = int(seg.get("address", 0))
    for block in seg.get("blocks", ()):
        size, frames = int(block["size"]), block.get("frames")
        history = block.get("history")
        if frames is None and history:  # torch 2.0: the last allocation recorded is the live one
            frames = history[-1].get("frames")
        yield int(block.get("address", addr)), size, str(block.get("state")), frames or ()
        addr += size  # blocks tile their segment in address order


def summarize_snapshot(snapshot: Mapping[str, Any], largest: int = LARGEST) -> SnapshotSummary:
    """The summary of one `_snapshot()` dict; ValueError naming the key when it is not one."""
    segments = snapshot.get("segments") if isinstance(snapshot, Mapping) else None
    if not isinstance(segments, list):
        raise ValueError(
            "not a CUDA memory snapshot: no 'segments' list; pass the dict "
            "torch.cuda.memory._snapshot() returns"
        )
    reserved = allocated = waiting = free_max = 0
    live: list[SnapshotBlock] = []
    for seg in segments:
        reserved += int(seg["total_size"])
        for addr, size, state, frames in _blocks(seg):
            if state == "active_allocated":
                allocated += size
                live.append(SnapshotBlock(addr, size, *_where(frames)))
            elif state == "active_awaiting_free":
                waiting += size
            else:
                free_max = max(free_max, size)
    live.sort(key=lambda b: -b.bytes)
    return SnapshotSummary(
        reserved, allocated, waiting, free_max, len(segments), tuple(live[:largest]), _sites(live)
    )


def _sites(live: Sequence[SnapshotBlock]) -> tuple[tuple[tuple[str, ...], int, int], ...]:
    sizes: Counter[tuple[str, ...]] = Counter()
    counts: Counter[tuple[str, ...]] = Counter()
    for b in live:
        sizes[b.frames] += b.bytes
        counts[b.frames] += 1
    return tuple((frames, n, counts[frames]) for frames, n in sizes.most_common(SITES))
