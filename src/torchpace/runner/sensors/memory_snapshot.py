"""Read the CUDA caching allocator's snapshot (`torch.cuda.memory._snapshot()`) into what the
out-of-memory explanation needs: reserved vs allocated, the largest free piece, and the largest live
blocks with the line of the user's code that made each.

The format is torch's documented one (torch/cuda/memory.py, `_snapshot`'s docstring; drawn by
torch/cuda/_memory_viz.py): `segments`, each a cudaMalloc'd range with `total_size`,
`allocated_size` and `blocks`; a block has `size`, `requested_size`, `address`, `state`
("active_allocated", "active_awaiting_free", "inactive") and `frames` (`filename`, `line`, `name`,
innermost first) when history was recorded with stacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torchpace.trace.stacks import SourceLocation, is_user_file

LARGEST = 10


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


def summarize_snapshot(snapshot: Mapping[str, Any], largest: int = LARGEST) -> SnapshotSummary:
    """The summary of one `_snapshot()` dict; ValueError naming the key when it is not one."""
    segments = snapshot.get("segments") if isinstance(snapshot, Mapping) else None
    if not isinstance(segments, list):
        raise ValueError(
            "not a CUDA memory snapshot: no 'segments' list; pass the dict "
            "torch.cuda.memory._snapshot() returns"
        )
    reserved = allocated = waiting = free_max = 0
    live: list[tuple[int, int, Sequence[Mapping[str, Any]]]] = []
    for seg in segments:
        reserved += int(seg["total_size"])
        for block in seg.get("blocks", ()):
            size, state = int(block["size"]), block.get("state")
            if state == "active_allocated":
                allocated += size
                live.append((int(block.get("address", 0)), size, block.get("frames") or ()))
            elif state == "active_awaiting_free":
                waiting += size
            else:
                free_max = max(free_max, size)
    live.sort(key=lambda b: -b[1])
    blocks = tuple(SnapshotBlock(a, s, *_where(frames)) for a, s, frames in live[:largest])
    return SnapshotSummary(reserved, allocated, waiting, free_max, len(segments), blocks)
