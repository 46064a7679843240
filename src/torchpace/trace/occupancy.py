"""Estimated SM efficiency and achieved occupancy per step: how much of the GPU its kernels used.

GPU busy says that some kernel was running, not how much of the device it used: a kernel of 4
thread blocks on a 132-SM H100 keeps the GPU "busy" while 128 SMs idle. The kernels' launch
figures (CUPTI, through Kineto's `blocks per SM` and `est. achieved occupancy %`) tell, with the
TensorBoard profiler plugin's definitions (pytorch/kineto, tb_plugin: gpu_metrics_parser.py and
its GPU metrics tooltip):

- est. SM efficiency of a kernel = min(blocks per SM, 1); of a step, the kernels' SM efficiency
  weighted by their duration, over the step's duration (so never above the GPU busy share);
- est. achieved occupancy of a step = the kernels' `est. achieved occupancy %` weighted by their
  duration (over kernel time, not step time).

The plugin adds up the blocks per SM of kernels running at once on several streams (capped at 1);
here each kernel counts alone and a step's total is capped at its GPU busy time: the same figure
when streams do not overlap. ROCm traces record neither field: both figures are None there.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter, mul

import msgspec

from torchpace.trace.events import GpuEvent

# A step whose kernels carry the launch figures for less than this share of their time gets no
# figure (it would describe the few kernels that have them).
MIN_KNOWN_SHARE = 0.5
_BLOCKS, _OCCUPANCY = attrgetter("blocks_per_sm"), attrgetter("occupancy_pct")


class LaunchColumns(msgspec.Struct, frozen=True):
    """Per kernel (in trace.kernels order): SM-efficiency and occupancy time, and the time they
    are known for. None where no kernel of the trace records the figure."""

    sm_us: list[float] | None  # min(blocks per SM, 1) x duration
    sm_known_us: list[float] | None  # duration where blocks per SM is known
    occupancy_us: list[float] | None  # occupancy (percent) x duration
    occupancy_known_us: list[float] | None


# complex: two columns, each with its all-known fast path and its partly-known one.
def launch_columns(kernels: Sequence[GpuEvent], durs: list[float]) -> LaunchColumns:
    """The columns of a trace's kernels (one pass each; in C where every kernel has the field)."""
    blocks = list(map(_BLOCKS, kernels))
    occupancy = list(map(_OCCUPANCY, kernels))
    sm_us: list[float] | None = None
    sm_known: list[float] | None = None
    if None not in blocks:
        sm_us = [d if b >= 1.0 else b * d for b, d in zip(blocks, durs, strict=True)]  # type: ignore[operator]
        sm_known = durs
    elif any(b is not None for b in blocks):
        sm_us = [
            min(b, 1.0) * d if b is not None else 0.0 for b, d in zip(blocks, durs, strict=True)
        ]
        sm_known = [d if b is not None else 0.0 for b, d in zip(blocks, durs, strict=True)]
    occ_us: list[float] | None = None
    occ_known: list[float] | None = None
    if None not in occupancy:
        occ_us, occ_known = list(map(mul, occupancy, durs)), durs  # type: ignore[arg-type]
    elif any(o is not None for o in occupancy):
        occ_us = [o * d if o is not None else 0.0 for o, d in zip(occupancy, durs, strict=True)]
        occ_known = [d if o is not None else 0.0 for o, d in zip(occupancy, durs, strict=True)]
    return LaunchColumns(sm_us, sm_known, occ_us, occ_known)


def step_figures(
    cols: LaunchColumns, durs: list[float], i: int, j: int, busy_us: float, step_us: float
) -> tuple[float | None, float | None]:
    """(est. SM efficiency, est. achieved occupancy), each 0-1, of the kernels i:j that started
    in a step of `step_us` with `busy_us` GPU busy time; None where the trace does not say."""
    kernel_us = sum(durs[i:j])
    occupancy = _share(cols.occupancy_us, cols.occupancy_known_us, i, j, kernel_us, None, None)
    return (
        _share(cols.sm_us, cols.sm_known_us, i, j, kernel_us, min(busy_us, step_us), step_us),
        None if occupancy is None else min(occupancy / 100, 1.0),  # a percentage
    )


def _share(
    weighted: list[float] | None,
    known: list[float] | None,
    i: int,
    j: int,
    kernel_us: float,
    cap_us: float | None,
    over_us: float | None,
) -> float | None:
    if weighted is None or known is None or kernel_us <= 0:
        return None
    known_us = sum(known[i:j])
    if known_us < MIN_KNOWN_SHARE * kernel_us:
        return None
    total = sum(weighted[i:j])
    if over_us is None:  # a mean over the kernels' own time (occupancy)
        return total / known_us
    if cap_us is not None:
        total = min(total, cap_us)
    return total / over_us if over_us > 0 else None
