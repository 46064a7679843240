"""The device's activity as columns: busy coverage over every stream, and the kernels.

Computed once per trace (cached) and read by the breakdown, the host-wait finder (a pageable
upload waits for the queue ahead while the GPU is busy) and the facts the rules share.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import add, attrgetter

import msgspec

from torchpace.trace import intervals as iv
from torchpace.trace.events import GpuEvent, RuntimeCall
from torchpace.trace.occupancy import LaunchColumns, launch_columns
from torchpace.trace.recording import Recording, per_trace
from torchpace.trace.summary import KernelClass

_TS, _DUR = attrgetter("ts_us"), attrgetter("dur_us")
KERNEL_CLASSES: tuple[KernelClass, ...] = (
    "gemm", "conv", "attention", "elementwise", "reduction", "communication", "copy", "other",
)  # fmt: skip
# Device work queued this long after the call that issued it, with nothing recorded before it,
# waited behind work the profiler did not record (queued before its window opened).
UNRECORDED_LEAD_MIN_US = 1_000.0


class GpuColumns(msgspec.Struct, frozen=True):
    """Device activity: the union of busy ranges on every stream, and the kernels as columns.

    Kernel columns follow `trace.kernels` order (sorted by start).
    """

    busy: iv.Coverage
    kernel_starts: list[float]
    kernel_durs: list[float]
    kernel_class: list[int]  # index into KERNEL_CLASSES
    launch: LaunchColumns  # SM efficiency and occupancy weights per kernel


@per_trace
def gpu_columns(trace: Recording) -> GpuColumns:
    """Union of kernel/copy/memset ranges on every stream, plus kernel classes."""
    gpu = [*trace.kernels, *trace.copies, *trace.memsets]
    gpu.sort(key=_TS)  # three sorted runs: timsort merges them
    starts = list(map(_TS, gpu))
    ends = list(map(add, starts, map(_DUR, gpu)))
    # The device was busy before the first recorded activity when that waited behind unrecorded
    # work, as far as the trace shows it (unrecorded_lead): that is not idle time.
    lanes = (trace.kernels, trace.copies, trace.memsets)
    per_step = device_us_per_step(lanes, len(trace.steps))
    lead = unrecorded_lead(gpu[0], trace.runtime_call_of(gpu[0]), per_step) if gpu else None
    if lead is not None and lead.counted:
        starts.insert(0, lead.span[0])
        ends.insert(0, lead.span[1])
    busy = iv.Coverage.of_sorted(starts, ends)
    index = {k: i for i, k in enumerate(KERNEL_CLASSES)}
    kernels = trace.kernels
    durs = [k.dur_us for k in kernels]
    return GpuColumns(
        busy,
        [k.ts_us for k in kernels],
        durs,
        [index[k.klass or "other"] for k in kernels],
        launch_columns(kernels, durs),
    )


def device_us_per_step(lanes: Sequence[Sequence[GpuEvent]], steps: int) -> float:
    """Recorded device time of the lanes (kernels, copies, memsets) per step (or window)."""
    return sum(g.dur_us for lane in lanes for g in lane) / max(1, steps)


class Lead(msgspec.Struct, frozen=True):
    """The time between the call that issued the trace's first device activity and its start."""

    span: iv.Interval
    counted: bool  # whether the evidence says the device was busy meanwhile (GPU busy time)
    evidence: str  # what says so, or why it is not counted


def unrecorded_lead(
    first: GpuEvent, call: RuntimeCall | None, device_us_per_step: float
) -> Lead | None:
    """When the trace's first device activity started long after the call that issued it, with
    nothing recorded before it: that lead, counted as busy only where the trace supports it.

    A trace often opens while the GPU still runs work queued before the profiler's window (the
    previous step, a request in flight): the first recorded copy or kernel then starts long after
    the call that issued it. A launch never waits on the device, so time inside one (module
    loading) is not counted; a copy or a synchronize waits for the queue from its start. The
    lead counts as busy when the host waited in that call until the device reached it, or when
    it is no longer than the device work the trace records per step (the previous step's work,
    still running); a longer lead that nothing waited on is not explained by this work (a first
    kernel on a cold device starts late), and stays idle.

    Args:
        device_us_per_step: the recorded device time per step (device_us_per_step).
    """
    if call is None:
        return None
    since = call.end_us if call.kind == "launch" else call.ts_us
    lead = first.ts_us - since
    if lead < UNRECORDED_LEAD_MIN_US:
        return None
    if call.kind != "launch" and call.end_us >= first.ts_us:
        return Lead((since, first.ts_us), True, f"the host waited in {call.name} until it ran")
    if lead <= device_us_per_step:
        return Lead(
            (since, first.ts_us),
            True,
            f"no longer than the {device_us_per_step / 1e3:.3g} ms of device work the trace "
            "records per step: the work before the window, still running",
        )
    return Lead(
        (since, first.ts_us),
        False,
        f"nothing waited for it, and it is longer than the {device_us_per_step / 1e3:.3g} ms of "
        "device work the trace records per step, so no unrecorded step explains it",
    )
