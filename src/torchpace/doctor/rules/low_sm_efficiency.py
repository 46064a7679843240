"""The GPU is busy, but its kernels are too small to fill it: few thread blocks per SM."""

from __future__ import annotations

from collections import defaultdict

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.kernel_facts import KernelColumns, kernel_columns, short_name
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.model import Trace

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


def _compute_kernels(trace: Trace, cols: KernelColumns) -> list[tuple[int, float, float]]:
    """(name index, duration us, blocks per SM) of the typical steps' compute kernels that record
    blocks per SM; collectives (NCCL's few-block kernels) are comm-bound's business."""
    kernels = trace.kernels
    out = []
    for j, n in enumerate(cols.name_index):
        if cols.klass[n] == "communication":
            continue
        blocks = kernels[cols.index[j]].blocks_per_sm
        if blocks is not None:
            out.append((n, cols.dur_us[j], blocks))
    return out


def _top_small(
    cols: KernelColumns, small: list[tuple[int, float, float]], sm_count: int | None
) -> list[EvidenceValue]:
    """The under-filling kernels with the most time: ms and calls per step, blocks per launch."""
    us: dict[int, float] = defaultdict(float)
    calls: dict[int, int] = defaultdict(int)
    blocks: dict[int, list[float]] = defaultdict(list)
    for n, dur, per_sm in small:
        us[n] += dur
        calls[n] += 1
        blocks[n].append(per_sm)
    rows: list[EvidenceValue] = []
    for n in sorted(us, key=lambda n: -us[n])[:6]:
        per_sm = sorted(blocks[n])[len(blocks[n]) // 2]
        row: dict[str, EvidenceValue] = {
            "kernel": short_name(cols.names[n]),
            "ms_per_step": round(us[n] / 1e3 / cols.steps, 3),
            "calls_per_step": round(calls[n] / cols.steps, 1),
            "blocks_per_sm": round(per_sm, 3),
        }
        if sm_count:
            row["blocks_count"] = round(per_sm * sm_count)
        rows.append(row)
    return rows


@rule("low-sm-efficiency")
def low_sm_efficiency(
    trace: Trace,
    *,
    min_busy_fraction: float = 0.30,
    max_fill_fraction: float = 0.50,
    min_step_fraction: float = 0.10,
) -> list[Finding]:
    """Fire when compute kernels keep the GPU busy but fill under half of its SMs on average."""
    cols = kernel_columns(trace)
    compute = _compute_kernels(trace, cols)
    if not compute:
        raise NotApplicable(UNKNOWN)
    step_ms = trace.breakdown.median_step_ms
    total_us = sum(dur for _, dur, _ in compute)
    busy = min(1.0, total_us / 1e3 / cols.steps / step_ms) if step_ms > 0 else 0.0
    if busy < min_busy_fraction:
        return []  # the GPU mostly waits: gpu-idle and launch-bound judge that
    fill = sum(min(b, 1.0) * dur for _, dur, b in compute) / total_us
    small = [k for k in compute if k[2] < 1.0]
    small_ms = sum(dur for _, dur, _ in small) / 1e3 / cols.steps
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
        "top_small_kernels": _top_small(cols, small, sm_count),
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
