"""The peak's split by category, and what it can and cannot say (memory_view.py's arithmetic)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from torchpace.policy.memory import CATEGORIES

if TYPE_CHECKING:
    from torchpace.runner.sensors.memory_census import HeldBlock

NEEDS_LIVE = (
    "parameters, gradients and optimizer state are told apart only in a live run: "
    "torchpace doctor train.py"
)


class _Sized(Protocol):
    @property
    def bytes(self) -> int: ...

    @property
    def category(self) -> str: ...

    @property
    def phase(self) -> str: ...


def split(
    blocks: Sequence[_Sized], before: Sequence[HeldBlock] | None, allocated: float, *, gpu: bool
) -> tuple[tuple[tuple[str, int], ...], int | None, tuple[str, ...]]:
    """(categories, allocated at the peak, notes).

    `blocks`: those made in the window and alive at the peak; `before`: the census's blocks the
    window never allocated (held since before it), None without a live run. On GPU `allocated`
    is the allocator's absolute total; on CPU the profiler's total since it started."""
    made = sum(b.bytes for b in blocks)
    if before is None:
        return _trace_only(blocks, made, allocated, gpu=gpu)
    totals: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
    for block in blocks:
        totals[block.category] += block.bytes
    for held_block in before:
        totals[held_block.category] += held_block.bytes
    held = sum(b.bytes for b in before)
    notes: list[str] = []
    if gpu:
        # The allocator's count is absolute: whatever the census and the window do not name
        # (cuDNN workspaces, tensors only C++ holds) is the rest.
        rest = int(allocated) - made - held
        totals["other"] += rest
        peak = int(allocated)
    else:
        peak = held + int(allocated)
        if abs(allocated - made) > 0.01 * max(allocated, 1):
            notes.append(
                f"the window's blocks alive at the peak add up to {made / 2**20:.1f} MiB, the "
                f"profiler's count to {allocated / 2**20:.1f} MiB (frees it did not pair)"
            )
    return tuple((c, n) for c, n in totals.items() if n), peak, tuple(notes)


def _trace_only(
    blocks: Sequence[_Sized], made: int, allocated: float, *, gpu: bool
) -> tuple[tuple[tuple[str, int], ...], int | None, tuple[str, ...]]:
    in_step = [b for b in blocks if b.phase != "earlier step"]
    forward = sum(b.bytes for b in in_step if b.category == "activations")
    rows = [
        ("activations", forward),
        ("made in the step, outside forward", sum(b.bytes for b in in_step) - forward),
        ("made in earlier steps of the window", made - sum(b.bytes for b in in_step)),
    ]
    if gpu:
        rows.append(("held from before the window", int(allocated) - made))
        return tuple(r for r in rows if r[1]), int(allocated), (NEEDS_LIVE,)
    note = (
        "on CPU the profiler counts only what it saw allocated: memory held from before the "
        "window (parameters, optimizer state) is not in this trace; " + NEEDS_LIVE
    )
    return tuple(r for r in rows if r[1]), None, (note,)
