"""Where the GPU's idle time goes: each idle instant of the typical steps, claimed by one cause.

Computed once per trace and read by gpu-idle (which reports the whole split) and by sync-point
(whose saving is the idle its syncs caused): both read the same figure for the same cause, so the
two findings never disagree on it. One cause, one owner: gpu-idle lists the idle of data, syncs and
allocator calls but leaves its saving to dataloader-stall, sync-point and allocator-churn.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import msgspec

from torchpace.doctor.facts.syncs import SyncPoint
from torchpace.trace import intervals as iv
from torchpace.trace.blocking import driver_init_calls
from torchpace.trace.breakdown import phase_ranges, top_level_ranges
from torchpace.trace.events import Step
from torchpace.trace.gpu import gpu_columns
from torchpace.trace.model import Trace

# Idle causes, in the order they claim idle time (an idle instant goes to the first that covers it):
# what blocks the host outright (driver start-up, allocator calls, a wait on the device) before
# what it chose to do (load data, communicate, compute). A sync inside a DataLoader range (a
# pipeline that reads results back while it loads) is the sync's: that is where the host stood.
CAUSES = (
    "launch_overhead", "context_init", "allocator", "sync", "data", "communication",
    "host_compute", "other",
)  # fmt: skip
# Gaps shorter than this between device work are launch latency, not a host doing something else.
LAUNCH_GAP_US = 15.0


class IdleSplit(msgspec.Struct, frozen=True):
    """The typical steps' GPU idle time, split by cause and scaled to the median step."""

    idle_fraction: float  # idle over the typical steps' time (time-weighted)
    step_ms: float  # the median step
    by_cause_ms: dict[str, float]  # per median step, one entry per CAUSES; adds up to idle_ms
    steps: int

    @property
    def idle_ms(self) -> float:
        return self.idle_fraction * self.step_ms


def _idle_gaps(trace: Trace, steps: list[Step]) -> list[iv.Interval]:
    """The GPU's idle ranges within the steps."""
    busy = gpu_columns(trace).busy
    return [gap for step in steps for gap in busy.gaps(step.ts_us, step.end_us)]


def _cause_sets(trace: Trace, syncs: Sequence[SyncPoint]) -> dict[str, list[iv.Interval]]:
    ranges = phase_ranges(trace)
    return {
        "context_init": [(r.ts_us, r.end_us) for r in driver_init_calls(trace)],
        "allocator": [(r.ts_us, r.end_us) for r in trace.runtime_of_kind("malloc", "free")],
        "sync": [p.idle_range for p in syncs],
        "data": ranges.dataloader + ranges.h2d,
        "communication": ranges.communication,
        "host_compute": top_level_ranges(trace, {trace.main_tid} | ranges.backward_tids),
    }


def idle_causes(
    trace: Trace, steps: list[Step], launch_gap_us: float, syncs: Sequence[SyncPoint]
) -> dict[str, float]:
    """Idle microseconds over `steps`, split by cause (see CAUSES for the precedence)."""
    every = _idle_gaps(trace, steps)
    gaps = [(s, e) for s, e in every if e - s >= launch_gap_us]
    long_us = sum(e - s for s, e in gaps)
    out = {"launch_overhead": sum(e - s for s, e in every) - long_us}
    idle = iv.Coverage.of_disjoint(gaps)
    # Precedence without interval subtraction: a cause gets what the union grows by.
    claimed = iv.Coverage.of(())
    before = 0.0
    for cause, ranges in _cause_sets(trace, syncs).items():
        if not ranges:  # the union does not grow: nothing to claim, and no pass to make
            out[cause] = 0.0
            continue
        claimed = iv.Coverage.of(itertools.chain(claimed.intervals(), ranges))
        after = idle.overlap_with(claimed)
        out[cause] = after - before
        before = after
    out["other"] = max(0.0, long_us - before)
    return out


def idle_split(
    trace: Trace, syncs: Sequence[SyncPoint], launch_gap_us: float = LAUNCH_GAP_US
) -> IdleSplit | None:
    """The idle split of the typical steps, given the trace's sync points; None when GPU busy
    time is unknown. Rules read it once per trace and gap through `Facts.idle_split`."""
    b = trace.breakdown
    if not trace.has_gpu or b.gpu_busy_fraction is None:
        return None
    steps = trace.typical_steps
    totals = idle_causes(trace, steps, launch_gap_us, syncs)
    whole = sum(totals.values())
    idle_ms = (1.0 - b.gpu_busy_fraction) * b.median_step_ms
    # The median step's idle time, in the proportions measured over all typical steps.
    by_cause = {c: idle_ms * totals.get(c, 0.0) / whole if whole > 0 else 0.0 for c in CAUSES}
    return IdleSplit(1.0 - b.gpu_busy_fraction, b.median_step_ms, by_cause, len(steps))
