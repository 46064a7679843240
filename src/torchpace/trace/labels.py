"""The user's own labels: time inside each `record_function` range, as a tree, median per step.

Profiling guides tell users to wrap phases in `torch.profiler.record_function("forward_pass")`.
The trace records each call as a `user_annotation` range on the thread that ran it and, for work it
launched on a GPU, a `gpu_user_annotation` range with the same External id on each stream it used:
but only for what that thread launched (a `backward` label's kernels come from the autograd thread)
and as a span from its first kernel to its last, idle gaps included. So a label's device time is
read from the work itself instead: every kernel, copy and memset whose runtime call was made during
the label's range, on any thread.
Ranges torch and its libraries record themselves are not the user's and are left out:
`ProfilerStep#`, `enumerate(DataLoader)#...`, `Optimizer.*`, `## ... ##` (torch.compile, TorchRec),
DistributedDataParallel/FSDP ranges and collectives (`nccl:*`, `gloo:*`, ...).

A label is a node of a tree: one name under the same enclosing labels (on the same thread). For each:
  host_ms    the summed duration of its ranges that start in a step, median over typical steps
  device_ms  per range, the summed duration of the kernels, copies and memsets launched while it
             ran (by their runtime call's start, on every thread; a CUDA graph launch brings all
             its kernels); median over typical steps. None on a trace without device activity.
  calls      ranges per step (median)
Both times include nested labels, as the profiler shows them. Steps that are warm-up or outliers
are left out, like everywhere else (Trace.typical_steps).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from torchpace.trace.events import HostOp, Step
from torchpace.trace.model import Trace
from torchpace.trace.names import COLLECTIVE_RANGE, LOOP_MARKERS, REGION_MARKER
from torchpace.trace.stats import median

NOT_USER = (
    *LOOP_MARKERS, REGION_MARKER, "DistributedDataParallel.",
    "DataParallel.",
    "FullyShardedDataParallel", "FSDP::", "Torch-Compiled Region", "CompiledFunction",
    "TorchDynamo", "PyTorch Profiler", "record_param_comms", "c10d::",
)  # fmt: skip
DEVICE_METHOD = (
    "device time: the kernels, copies and memsets launched while the label ran, from any thread "
    "(a backward pass launches from the autograd thread)"
)

Path = tuple[str, ...]


# torch.compile's own timing ranges ("dynamo_data: compile_id=0/4", "backend_compile_data:
# fn_name=..., compile_id=0/5", "gc_data: ...") are recorded as user annotations. In torch 2.13
# those are instants marking the compile id; the time is in cpu_op ranges named
# "_compile.compile_inner (dynamo_timed)", "bytecode_tracing (dynamo_timed)", ...
DYNAMO_TIMED = "compile_id="
DYNAMO_TIMED_OP = "(dynamo_timed)"


def is_user_label(name: str) -> bool:
    """Whether a user_annotation range is the user's own label, not one torch records."""
    return (
        not name.startswith(NOT_USER)
        and not COLLECTIVE_RANGE.match(name)
        and DYNAMO_TIMED not in name
    )


@dataclass(frozen=True)
class LabelRow:
    """One label of the tree, with its medians per step."""

    name: str
    path: Path  # names from the outermost enclosing label down to this one
    calls: float  # ranges per step (median)
    host_ms: float  # host time per step (median), nested labels included
    device_ms: float | None  # device time per step (median); None without device activity
    steps_seen: int  # typical steps in which the label ran

    @property
    def depth(self) -> int:
        """0 for a label no other label encloses."""
        return len(self.path) - 1


@dataclass(frozen=True)
class UserLabels:
    """Every user label of a trace, in tree order (each label, then its children by host time)."""

    rows: tuple[LabelRow, ...]
    steps: int  # typical steps the medians are taken over
    device_method: str  # how device time was measured; "" on a trace without device activity


def user_labels(trace: Trace) -> UserLabels | None:
    """The user's labels with their medians per step; None when the trace has none in its steps."""
    notes = [o for o in trace.host_ops if o.kind == "annotation"]
    users = {name for name in {o.name for o in notes} if is_user_label(name)}
    ops = [o for o in notes if o.name in users]
    steps = trace.typical_steps
    if not ops or not steps:
        return None
    ops.sort(key=lambda o: (o.tid, o.ts_us, -o.dur_us))  # a parent before a child it starts with
    paths = _paths(ops)
    device = launched_device_us(trace, ops) if trace.has_gpu else None
    sums = _per_step(ops, paths, device, steps)
    if not sums:
        return None
    rows = [_row(path, cells, device is not None) for path, cells in sums.items()]
    return UserLabels(tuple(_tree_order(rows)), len(steps), DEVICE_METHOD if device else "")


def _paths(ops: Sequence[HostOp]) -> list[Path]:
    """Each range's path of enclosing labels (ops sorted by thread, then start)."""
    out: list[Path] = []
    stack: list[tuple[float, Path]] = []  # (end, path) of the open ranges on this thread
    tid = None
    for op in ops:
        if op.tid != tid:
            stack, tid = [], op.tid
        while stack and stack[-1][0] <= op.ts_us:
            stack.pop()
        path = (*stack[-1][1], op.name) if stack else (op.name,)
        stack.append((op.end_us, path))
        out.append(path)
    return out


def launched_device_us(trace: Trace, ranges: Sequence[HostOp]) -> list[float]:
    """Each range's device microseconds: the kernels, copies and memsets whose runtime call
    started inside it, on any thread (nested ranges include their children's work)."""
    dur: dict[int, float] = {}
    for lane in (trace.kernels, trace.copies, trace.memsets):
        for g in lane:
            if g.correlation is not None:  # a graph launch's kernels share its correlation
                dur[g.correlation] = dur.get(g.correlation, 0.0) + g.dur_us
    calls = [(r.ts_us, dur[r.correlation]) for r in trace.runtime if r.correlation in dur]
    starts = [ts for ts, _ in calls]  # runtime calls are sorted by start
    total = list(accumulate((us for _, us in calls), initial=0.0))
    return [
        total[bisect_right(starts, o.end_us)] - total[bisect_left(starts, o.ts_us)] for o in ranges
    ]


def _per_step(
    ops: Sequence[HostOp], paths: Sequence[Path], device: Sequence[float] | None, steps: list[Step]
) -> dict[Path, list[list[float]]]:
    """Per label: [host us, device us, calls] per typical step (ranges bucketed by their start)."""
    starts = [s.ts_us for s in steps]
    sums: dict[Path, list[list[float]]] = {}
    for n, op in enumerate(ops):
        k = bisect_right(starts, op.ts_us) - 1
        if k < 0 or op.ts_us > steps[k].end_us:
            continue  # outside the typical steps (warm-up, an outlier, before the loop)
        cells = sums.get(paths[n])
        if cells is None:
            cells = sums[paths[n]] = [[0.0] * len(steps) for _ in range(3)]
        cells[0][k] += op.dur_us
        cells[1][k] += device[n] if device is not None else 0.0
        cells[2][k] += 1
    return sums


def _row(path: Path, cells: list[list[float]], device: bool) -> LabelRow:
    host, dev, calls = cells
    return LabelRow(
        name=path[-1],
        path=path,
        calls=median(calls),
        host_ms=median(host) / 1e3,
        device_ms=median(dev) / 1e3 if device else None,
        steps_seen=sum(1 for c in calls if c),
    )


def _tree_order(rows: list[LabelRow]) -> list[LabelRow]:
    """Depth first: each label, then its children, siblings by host time (largest first)."""
    children: dict[Path, list[LabelRow]] = {}
    for row in rows:
        children.setdefault(row.path[:-1], []).append(row)
    out: list[LabelRow] = []
    todo = sorted(children.get((), []), key=lambda r: (r.host_ms, r.name))
    while todo:
        row = todo.pop()
        out.append(row)
        todo += sorted(children.get(row.path, []), key=lambda r: (r.host_ms, r.name))
    # A label whose parent ran only outside the steps has no parent row: list it at the end.
    seen = {r.path for r in out}
    return out + [r for r in rows if r.path not in seen]
