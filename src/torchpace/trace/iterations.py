"""Training-loop iterations inferred from the markers torch records in every loop.

Used when a trace has no `ProfilerStep#` ranges (no `prof.step()` call). torch records, on the
thread that runs the loop, `enumerate(DataLoader)#...__next__` for every batch taken and
`Optimizer.step#X.step` / `Optimizer.zero_grad#X.zero_grad` for every optimizer call; the autograd
engine records the nodes of every backward pass, the loss's node first (its root). Each repeats a
fixed number of times per iteration: once in a plain loop, several batches per step with gradient
accumulation, two optimizer calls in a GAN. So the marker that repeats least often delimits
iterations (ties go to the DataLoader, whose batch opens the loop body):

  dataloader  an iteration starts where its batch is taken
  optimizer   an iteration ends where its optimizer call ends, and starts at the first marker of
              its cycle (the batch taken for it, when there is one)
  backward    an iteration ends where its backward pass ends (hand-written weight updates), and
              starts where the one before ended (the first: at the training thread's first op),
              so its forward pass is in it

Iterations are contiguous: each runs until the next one starts, so together they partition the
time from the first one's start to the last one's end. An iteration the trace cuts off (the last
batch with no optimizer call after it, a loop entered before the trace began) is left out.

Only repeats of the same work are iterations: backward passes delimit them only when each pass
runs the same autograd nodes (a harness that runs forward and backward once through each of
several different layers repeats its loss, not an iteration).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import pairwise
from typing import Literal

import msgspec

from torchpace.trace.events import HostOp, Step
from torchpace.trace.names import BACKWARD_OP, OPTIMIZER_STEP, OPTIMIZER_ZERO_GRAD, is_dataloader
from torchpace.trace.stats import median

Kind = Literal["dataloader", "optimizer", "zero_grad", "backward"]
# Tie-break between markers repeating equally often: the one that opens the loop body first.
_ORDER: dict[Kind, int] = {"dataloader": 0, "optimizer": 1, "zero_grad": 2, "backward": 3}
_OPENING: frozenset[Kind] = frozenset({"dataloader"})
_SOURCE: dict[Kind, Literal["dataloader", "optimizer", "backward"]] = {
    "dataloader": "dataloader",
    "optimizer": "optimizer",
    "zero_grad": "optimizer",
    "backward": "backward",
}


class Marker(msgspec.Struct, frozen=True):
    """One repeating marker: its kind, its name and its top-level ranges (by start)."""

    kind: Kind
    name: str
    starts: list[float]
    ends: list[float]


class Inferred(msgspec.Struct, frozen=True):
    """Iterations found from a marker, and a sentence saying how."""

    steps: tuple[Step, ...]
    source: Literal["dataloader", "optimizer", "backward"]
    detail: str


def _kind(op: HostOp, main_tid: int) -> Kind | None:
    if op.tid != main_tid:
        return None
    if is_dataloader(op.name):
        return "dataloader"
    if op.name.startswith(OPTIMIZER_STEP):
        return "optimizer"
    if op.name.startswith(OPTIMIZER_ZERO_GRAD):
        return "zero_grad"
    return None


def _is_backward(name: str) -> bool:
    # torch >= 1.11 wraps each autograd node; torch <= 1.10 names the node ("NllLossBackward").
    return name.startswith(BACKWARD_OP) or (
        name.endswith(("Backward", "Backward0", "Backward1")) and name[:1].isupper()
    )


def markers(host: Sequence[HostOp], main_tid: int) -> list[Marker]:
    """Every repeating-marker name in the trace with its top-level ranges (one pass)."""
    found: dict[str, tuple[Kind, list[float], list[float]]] = {}
    root: str | None = None
    for op in host:
        kind = _kind(op, main_tid)
        if kind is None:
            if root is None and _is_backward(op.name):
                root = op.name  # the first backward node evaluated: the loss's
            if op.name != root:
                continue
            kind = "backward"
        _, starts, ends = found.setdefault(op.name, (kind, [], []))
        if not ends or op.ts_us >= ends[-1]:  # nested calls of the same marker count once
            starts.append(op.ts_us)
            ends.append(op.ts_us + op.dur_us)
    return [Marker(k, name, s, e) for name, (k, s, e) in found.items()]


def _spans(anchor: Marker, others: list[Marker]) -> bool:
    """Whether the anchor's iterations hold at least half of every marker repeating as often or
    more: an evaluation loop's few batches after training repeat least often but delimit nothing."""
    lo, hi = anchor.starts[0], anchor.starts[-1] if anchor.kind in _OPENING else anchor.ends[-1]
    for other in others:
        if other is anchor or len(other.starts) < len(anchor.starts):
            continue
        inside = bisect_right(other.starts, hi) - bisect_left(other.starts, lo)
        if 2 * inside < len(other.starts) - 1:
            return False
    return True


def _per_cycle(other: Marker, bounds: list[tuple[float, float]]) -> int:
    """How many times `other` runs per cycle, from complete cycles [lo, hi)."""
    counts = [bisect_left(other.starts, hi) - bisect_left(other.starts, lo) for lo, hi in bounds]
    return round(median(counts)) if counts else 1


def _opening(anchor: Marker, others: list[tuple[Marker, int]]) -> list[tuple[float, float]]:
    starts = anchor.starts
    spans = list(pairwise(starts))
    last = starts[-1]
    # The last iteration ends with the last marker of its cycle; cut off when one is missing.
    ends = [anchor.ends[-1]]
    for other, count in others:
        i = bisect_left(other.starts, last)
        if len(other.starts) - i < count:
            return spans
        ends.append(other.ends[i + count - 1])
    if others:
        spans.append((last, max(ends)))
    return spans  # with no other marker, nothing says where the last iteration ends


def _closing(anchor: Marker, others: list[tuple[Marker, int]]) -> list[tuple[float, float]]:
    firsts: list[float] = []
    for n, end in enumerate(anchor.ends):
        lo = anchor.ends[n - 1] if n else float("-inf")
        first = anchor.starts[n]
        for other, count in others:
            i, j = bisect_right(other.starts, lo), bisect_right(other.starts, end)
            if n == 0 and j - i < count and len(anchor.ends) > 1:
                first = float("nan")  # the trace began inside the first iteration
                break
            if j > i:
                first = min(first, other.starts[max(i, j - count)])
        firsts.append(first)
    spans = list(pairwise(firsts))
    spans.append((firsts[-1], anchor.ends[-1]))
    return [(a, b) for a, b in spans if a == a]  # a != a: NaN, the cut-off first iteration


def _backward_passes(host: Sequence[HostOp], root: Marker) -> list[tuple[float, frozenset[str]]]:
    """Each backward pass from its root: where its last node ends, and the nodes it ran.

    A pass is every autograd node (on any thread) from its root's start to the next root's."""
    starts = root.starts
    ends = [0.0] * len(starts)
    nodes: list[set[str]] = [set() for _ in starts]
    for op in host:
        if op.ts_us < starts[0] or not _is_backward(op.name):
            continue
        i = bisect_right(starts, op.ts_us) - 1
        ends[i] = max(ends[i], op.ts_us + op.dur_us)
        nodes[i].add(op.name)
    return [(end, frozenset(names)) for end, names in zip(ends, nodes, strict=True)]


def _same_work(passes: list[tuple[float, frozenset[str]]]) -> bool:
    """Whether every backward pass ran the same autograd nodes (the last may be cut off)."""
    first = passes[0][1]
    *whole, last = passes
    return all(names == first for _, names in whole) and last[1] <= first


def _backward_spans(
    host: Sequence[HostOp], main_tid: int, passes: list[tuple[float, frozenset[str]]]
) -> list[tuple[float, float]]:
    """Iterations that end where their backward pass ends, each from the end of the one before
    (none from a single pass: one backward is no loop)."""
    if len(passes) < 2:
        return []
    begin = next((op.ts_us for op in host if op.tid == main_tid), passes[0][0])
    ends = [end for end, _ in passes]
    return list(zip([begin, *ends[:-1]], ends, strict=True))


def _anchor(found: list[Marker]) -> Marker | None:
    """The marker repeating least often that spans the loop (see _spans); None without markers."""
    candidates = [m for m in found if len(m.starts) >= 2] or found
    if not candidates:
        return None
    candidates.sort(key=lambda m: (len(m.starts), _ORDER[m.kind]))
    repeating = [m for m in found if len(m.starts) >= 2]
    return next((m for m in candidates if _spans(m, repeating)), candidates[0])


# complex: the choice of anchor (backward roots, else opening or closing markers) reads as one
# decision.
def infer(host: Sequence[HostOp], main_tid: int) -> Inferred | None:
    """Iterations from the marker repeating least often; None when no marker repeats."""
    found = markers(host, main_tid)
    anchor = _anchor(found)
    passes: list[tuple[float, frozenset[str]]] = []
    if anchor is not None and anchor.kind == "backward":
        passes = _backward_passes(host, anchor)
        if not _same_work(passes):  # different work after each root: not a loop's iterations
            found.remove(anchor)
            anchor = _anchor(found)
    if anchor is None:
        return None
    if anchor.kind == "backward":
        spans = _backward_spans(host, main_tid, passes)
    else:
        opening = anchor.kind in _OPENING
        cycles = list(pairwise(anchor.starts if opening else anchor.ends))
        others = [(m, _per_cycle(m, cycles)) for m in found if m is not anchor]
        others = [(m, c) for m, c in others if c > 0 and m.kind != "backward"]
        spans = _opening(anchor, others) if opening else _closing(anchor, others)
    steps = tuple(Step(i, lo, hi - lo) for i, (lo, hi) in enumerate(spans) if hi > lo)
    if not steps:
        return None
    return Inferred(steps, _SOURCE[anchor.kind], _sentence(anchor, len(steps)))


def _sentence(anchor: Marker, count: int) -> str:
    plural = "s" if count != 1 else ""
    how = {
        "dataloader": "each starts where a batch is taken",
        "optimizer": "each ends where the optimizer step ends",
        "zero_grad": "each ends where zero_grad ends",
        "backward": "each ends where a backward pass ends, the passes running the same nodes",
    }[anchor.kind]
    return (
        f"{count} iteration{plural} inferred from the repeating {anchor.name} "
        f"({how}; the trace has no ProfilerStep# markers)"
    )
