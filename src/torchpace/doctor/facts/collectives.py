"""Collective communication in a trace: when it runs, and how much of it overlaps compute.

On a GPU trace, collectives are the communication kernels (NCCL/RCCL) and compute is every other
kernel. On a CPU trace (gloo), collectives are the `gloo:*`/`nccl:*` record_function ranges the
process group records on its own thread, and compute is the aten ops of the training thread.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from math import prod
from operator import itemgetter

import msgspec

from torchpace.doctor.facts.kernels import in_ranges, typical_window
from torchpace.doctor.finding import EvidenceValue
from torchpace.doctor.registry import NotApplicable
from torchpace.trace import intervals as iv
from torchpace.trace.events import HostOp
from torchpace.trace.gpu import KERNEL_CLASSES, gpu_columns
from torchpace.trace.model import Trace
from torchpace.trace.names import COLLECTIVE_RANGE
from torchpace.trace.stats import median

_START = itemgetter(0)


class CommStats(msgspec.Struct, frozen=True):
    """Per-step medians of collective time, and what the collectives were."""

    source: str  # "kernels" or "host ranges"
    comm_ms: float  # union of collective time per step
    exposed_ms: float  # collective time with no compute running beside it
    largest_ms: float  # the longest single collective per step (the last bucket cannot overlap)
    step_ms: float
    names: dict[str, float]  # collective name -> calls per step
    # Bytes the collectives moved per step, from the recorded input shapes and dtypes of host
    # ranges (gloo records them with record_shapes=True); None when not recorded.
    bytes_per_step: float | None = None
    # Each typical step's exposed collective time (ms), in the order of typical_window's ranges:
    # a rank's work step by step (facts/ranks.py), not one median minus another.
    exposed_per_step_ms: tuple[float, ...] = ()

    @property
    def comm_fraction(self) -> float:
        return self.comm_ms / self.step_ms if self.step_ms > 0 else 0.0

    @property
    def overlapped_fraction(self) -> float:
        return 1.0 - self.exposed_ms / self.comm_ms if self.comm_ms > 0 else 0.0


# Bytes per element of the dtypes collectives carry (the profiler's names).
_DTYPE_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8,
                "int": 4, "signed char": 1, "unsigned char": 1, "bool": 1}  # fmt: skip


def _op_bytes(op: HostOp) -> float | None:
    """The bytes a collective's inputs hold, from its recorded shapes and dtypes."""
    shapes, types = op.shapes(), op.types()
    if not shapes or not types:
        return None
    total = 0.0
    for dims, dtype in zip(shapes, types, strict=False):
        size = _DTYPE_BYTES.get(dtype)
        if size is None or not dims:
            continue
        total += size * prod(dims)
    return total


def _comm_ranges(trace: Trace) -> tuple[str, list[iv.Interval], list[str]] | None:
    if trace.kernels:
        device = gpu_columns(trace)  # cached by the breakdown
        comm = KERNEL_CLASSES.index("communication")
        picked = [i for i, k in enumerate(device.kernel_class) if k == comm]
        if picked:
            starts, durs = device.kernel_starts, device.kernel_durs
            names = [trace.kernels[i].name.split("(")[0] for i in picked]
            return "kernels", [(starts[i], starts[i] + durs[i]) for i in picked], names
    ops = [o for o in trace.ops_matching(COLLECTIVE_RANGE) if o.kind == "annotation"]
    if not ops:
        return None
    return "host ranges", [(o.ts_us, o.end_us) for o in ops], [o.name for o in ops]


def _compute_ranges(trace: Trace, source: str) -> iv.Coverage:
    if source == "kernels":
        device = gpu_columns(trace)
        comm = KERNEL_CLASSES.index("communication")
        work = zip(device.kernel_starts, device.kernel_durs, device.kernel_class, strict=True)
        starts, ends = [], []
        for s, d, k in work:  # kernel columns are sorted by start
            if k != comm:
                starts.append(s)
                ends.append(s + d)
        return iv.Coverage.of_sorted(starts, ends)
    ops = [o for o in trace.host_ops if o.kind == "op" and o.tid == trace.main_tid]
    return iv.Coverage.of((o.ts_us, o.end_us) for o in ops)


def comm_stats(trace: Trace) -> CommStats | None:
    """Collective time per step and its overlap with compute; None when there are none
    (`Facts.comm`)."""
    found = _comm_ranges(trace)
    stats = None if found is None else _stats(trace, *found)
    if stats is None or found is None or found[0] != "host ranges":
        return stats
    return msgspec.structs.replace(stats, bytes_per_step=_bytes_per_step(trace))


def _bytes_per_step(trace: Trace) -> float | None:
    """Bytes the recorded collective ranges moved per typical step; None without shapes."""
    ranges, steps = typical_window(trace)
    ops = [o for o in trace.ops_matching(COLLECTIVE_RANGE) if o.kind == "annotation"]
    inside = [o for o, k in zip(ops, in_ranges([o.ts_us for o in ops], ranges), strict=True) if k]
    sizes = [_op_bytes(o) for o in inside]
    if not sizes or any(b is None for b in sizes) or steps <= 0:
        return None
    return sum(b for b in sizes if b is not None) / steps


# complex: one pass over the typical steps computes the three medians together.
def _stats(
    trace: Trace, source: str, calls: list[iv.Interval], names: list[str]
) -> CommStats | None:
    ranges, steps = typical_window(trace)
    keep = in_ranges([s for s, _ in calls], ranges, ordered=True)  # calls are by start
    kept = [c for c, k in zip(calls, keep, strict=True) if k]  # single collectives
    if not kept:
        return None
    comm = iv.Coverage.of(kept)
    compute = _compute_ranges(trace, source)
    per_step: list[tuple[float, float, float]] = []
    for lo, hi in ranges:
        a, b = bisect_left(comm.starts, lo), bisect_left(comm.starts, hi)
        inside = [(s, min(e, hi)) for s, e in zip(comm.starts[a:b], comm.ends[a:b], strict=True)]
        total = sum(e - s for s, e in inside)
        # Collective time with compute beside it: the compute coverage inside each comm range.
        both = compute.overlap(inside)
        first, last = bisect_left(kept, lo, key=_START), bisect_right(kept, hi, key=_START)
        longest = max((min(e, hi) - s for s, e in kept[first:last]), default=0.0)
        per_step.append((total, total - both, longest))
    counts = Counter(n for n, k in zip(names, keep, strict=True) if k)
    return CommStats(
        source=source,
        comm_ms=median(p[0] for p in per_step) / 1e3,
        exposed_ms=median(p[1] for p in per_step) / 1e3,
        largest_ms=median(p[2] for p in per_step) / 1e3,
        step_ms=trace.breakdown.median_step_ms,
        names={n: round(c / steps, 1) for n, c in counts.most_common(6)},
        exposed_per_step_ms=tuple(p[1] / 1e3 for p in per_step),
    )


# DDP's first gradient bucket (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES): gradients that fit
# it are all-reduced in one call, after backward ends; nothing can overlap it, and halving its
# bytes saves little (a call this small costs its latency, not its bandwidth).
FIRST_BUCKET_BYTES = 1 << 20


def one_bucket(stats: CommStats) -> bool:
    """Whether the collectives moved no more than DDP's first bucket per step (when recorded)."""
    return stats.bytes_per_step is not None and stats.bytes_per_step <= FIRST_BUCKET_BYTES


# What comm-bound and comm-overlap both say of a multi-rank run.
WAIT_CAVEAT = (
    "Time in a collective includes waiting for the slowest rank: if rank-imbalance fires on the "
    "folder of all ranks' traces, fix that first."
)


def require_comm(trace: Trace, stats: CommStats | None) -> CommStats | None:
    """The trace's collective stats (`Facts.comm`); NotApplicable when a multi-rank trace shows
    none: its communication was not recorded, which is not "no communication"."""
    world = trace.info.world_size or 1
    if stats is None and world > 1:
        raise NotApplicable(
            f"rank {trace.info.rank} of {world} shows no collective kernels or ranges in its steps",
            "torch.profiler.profile(activities=[CPU, CUDA]) around the DDP training steps",
        )
    return stats


def comm_evidence(trace: Trace, stats: CommStats) -> dict[str, EvidenceValue]:
    """The numbers both communication rules report."""
    return {
        "collective_ms_per_step": round(stats.comm_ms, 3),
        "collective_step_fraction": round(stats.comm_fraction, 3),
        "exposed_collective_ms_per_step": round(stats.exposed_ms, 3),
        "overlapped_fraction": round(stats.overlapped_fraction, 3),
        "measured_from": stats.source,
        "backend_name": trace.info.backend or "unknown",
        "world_size": trace.info.world_size or 1,
        "collectives_per_step": dict(stats.names),
        **({"collective_bytes_per_step": stats.bytes_per_step} if stats.bytes_per_step else {}),
    }
