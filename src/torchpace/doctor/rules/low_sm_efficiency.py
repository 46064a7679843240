"""The GPU is busy, but its kernels are too small to fill it: few thread blocks per SM."""

from __future__ import annotations

from collections import defaultdict
from itertools import compress
from operator import itemgetter, lt

import msgspec

from torchpace.doctor.facts import facts_of
from torchpace.doctor.facts.kernels import KernelColumns, short_name
from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.gpu import gpu_columns
from torchpace.trace.model import Trace
from torchpace.trace.stats import median

FIX = """\
# The GPU runs kernels too small to fill its SMs. Give each kernel more work, or fewer kernels:
# 1. Fuse chains of small elementwise ops into one kernel each (same math):
model = torch.compile(model)
# 2. A larger batch fills every SM (changes the optimisation: scale the learning rate and compare
#    the loss curve; for inference, batch requests together):
loader = DataLoader(dataset, batch_size=4 * batch_size, ...)
# 3. Many tiny kernels in a row: CUDA graphs replay them without the per-launch gaps
model = torch.compile(model, mode="reduce-overhead")"""
UNKNOWN = (
    "the trace's kernels do not record `blocks per SM` (ROCm traces, and profilers that did not "
    "record kernel launch figures)"
)


class ComputeKernels(msgspec.Struct, frozen=True):
    """The typical steps' compute kernels that record blocks per SM, as columns. Collectives are
    left out: NCCL uses a few blocks on purpose, and comm-bound judges it."""

    name_index: list[int]  # into KernelColumns.names
    known_us: list[float]  # duration
    sm_us: list[float]  # min(blocks per SM, 1) x duration


def _pick(values: list[float], index: list[int]) -> list[float]:
    if len(index) > 1:
        return list(itemgetter(*index)(values))  # gathers in C
    return [values[i] for i in index]


def compute_kernels(trace: Trace, cols: KernelColumns) -> ComputeKernels:
    """The columns, from the launch figures the breakdown already holds (trace.kernels order)."""
    launch = gpu_columns(trace).launch
    if launch.sm_us is None or launch.sm_known_us is None:
        raise NotApplicable(UNKNOWN)
    compute = [klass != "communication" for klass in cols.klass]
    mask = list(map(compute.__getitem__, cols.name_index))
    known = list(compress(_pick(launch.sm_known_us, cols.index), mask))
    sm = list(compress(_pick(launch.sm_us, cols.index), mask))
    names = list(compress(cols.name_index, mask))
    keep = [k > 0 for k in known]  # kernels whose blocks per SM is unknown have no known time
    return ComputeKernels(
        list(compress(names, keep)), list(compress(known, keep)), list(compress(sm, keep))
    )


def _top_small(
    cols: KernelColumns, kernels: ComputeKernels, small: list[bool], sm_count: int | None
) -> list[EvidenceValue]:
    """The under-filling kernels with the most time: ms and calls per step, blocks per launch."""
    us: dict[int, float] = defaultdict(float)
    blocks: dict[int, list[float]] = defaultdict(list)
    rows = zip(kernels.name_index, kernels.known_us, kernels.sm_us, strict=True)
    for n, dur, sm in compress(rows, small):
        us[n] += dur
        blocks[n].append(sm / dur)  # under 1: min(blocks per SM, 1) is blocks per SM itself
    out: list[EvidenceValue] = []
    for n in sorted(us, key=lambda n: -us[n])[:6]:
        per_sm = median(blocks[n])
        row: dict[str, EvidenceValue] = {
            "kernel": short_name(cols.names[n]),
            "ms_per_step": round(us[n] / 1e3 / cols.steps, 3),
            "calls_per_step": round(len(blocks[n]) / cols.steps, 1),
            "blocks_per_sm": round(per_sm, 3),
        }
        if sm_count:
            row["blocks_count"] = round(per_sm * sm_count)
        out.append(row)
    return out


@rule("low-sm-efficiency")
def low_sm_efficiency(
    trace: Trace,
    *,
    min_busy_fraction: float = 0.30,
    max_fill_fraction: float = 0.50,
    min_step_fraction: float = 0.10,
) -> list[Finding]:
    """Fire when compute kernels keep the GPU busy but fill under half of its SMs on average."""
    cols = facts_of(trace).kernels
    kernels = compute_kernels(trace, cols)
    step_ms = facts_of(trace).step_ms  # the device's where it lags
    total_us = sum(kernels.known_us)
    if total_us <= 0 or step_ms <= 0:
        return []  # no compute kernel in the typical steps
    busy = min(1.0, total_us / 1e3 / cols.steps / step_ms)
    if busy < min_busy_fraction:
        return []  # the GPU mostly waits: gpu-idle and launch-bound judge that
    fill = sum(kernels.sm_us) / total_us
    small = list(map(lt, kernels.sm_us, kernels.known_us))  # fewer blocks than SMs
    small_ms = sum(compress(kernels.known_us, small)) / 1e3 / cols.steps
    if fill >= max_fill_fraction or small_ms < min_step_fraction * step_ms:
        return []
    sm_count = next((d.sm_count for d in trace.devices if d.sm_count), None)
    bd = trace.breakdown
    evidence: dict[str, EvidenceValue] = {
        "compute_busy_fraction": round(busy, 3),
        "sm_fill_fraction": round(fill, 3),
        "sm_efficiency_fraction": (
            round(bd.sm_efficiency, 3) if bd.sm_efficiency is not None else None
        ),
        "achieved_occupancy_fraction": (
            round(bd.achieved_occupancy, 3) if bd.achieved_occupancy is not None else None
        ),
        "small_kernel_ms_per_step": round(small_ms, 3),
        "sm_count": sm_count,
        "top_small_kernels": _top_small(cols, kernels, small, sm_count),
    }
    return [_finding(busy, fill, small_ms, step_ms, sm_count, evidence)]


def _finding(
    busy: float,
    fill: float,
    small_ms: float,
    step_ms: float,
    sm_count: int | None,
    evidence: dict[str, EvidenceValue],
) -> Finding:
    sms = f"its {sm_count} SMs" if sm_count else "its SMs"
    return Finding(
        rule="low-sm-efficiency",
        severity=Severity.MEDIUM if fill < 0.25 else Severity.LOW,
        summary=(
            f"Kernels keep the GPU busy {busy:.0%} of the step but fill on average {fill:.0%} "
            f"of {sms}: {small_ms:.1f} ms per step ({small_ms / step_ms:.0%}) runs in kernels "
            "with fewer thread blocks than SMs"
        ),
        evidence=evidence,
        fix=FIX,
        saving_ms=None,
        caveat=(
            "No saving is estimated: a fuller GPU means more work per kernel (a larger batch) or "
            "fewer kernels (fusion), and how much the step gains depends on whether those kernels "
            "are bound by memory, latency or launches; measure the step before and after."
        ),
    )
