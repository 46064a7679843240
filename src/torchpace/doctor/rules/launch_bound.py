"""Many tiny kernels: the GPU finishes each before the host has launched the next."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.kernel_facts import (
    KernelColumns,
    in_ranges,
    kernel_columns,
    launching_op,
    per_name_count,
    short_name,
    typical_window,
)
from torchpace.doctor.registry import rule
from torchpace.trace.breakdown import gpu_columns
from torchpace.trace.model import Trace

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
# With CUDA graphs or fused kernels the device still leaves ~1-2 us between kernels.
RESIDUAL_GAP_US = 2.0
FIX = """\
# Fewer, bigger kernels: compile the model (fuses elementwise ops; "reduce-overhead" also
# captures CUDA graphs, which replay all launches at once)
model = torch.compile(model)                       # or mode="reduce-overhead"
# Optimizers: one multi-tensor kernel instead of one per parameter
optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)   # or foreach=True
# Static shapes and no per-step .item() keep CUDA graphs possible."""


def launch_calls(trace: Trace) -> tuple[Ints, Floats, Floats, Ints]:
    """Kernel-launch runtime calls sorted by correlation: (correlation, start, end, thread)."""
    calls = [r for r in trace.runtime if r.kind == "launch" and r.correlation is not None]
    n = len(calls)
    corr = np.fromiter((r.correlation or 0 for r in calls), np.int64, n)
    start = np.fromiter((r.ts_us for r in calls), np.float64, n)
    end = start + np.fromiter((r.dur_us for r in calls), np.float64, n)
    tid = np.fromiter((r.tid for r in calls), np.int64, n)
    order = np.argsort(corr, kind="stable")
    return corr[order], start[order], end[order], tid[order]


def launch_lag_us(
    trace: Trace, cols: KernelColumns, calls: tuple[Ints, Floats, Floats, Ints]
) -> Floats:
    """Per kernel with a known launch call: kernel start minus the end of that call."""
    corr, _, ends, _ = calls
    kernel_corr = np.array(
        [
            k.correlation if (k := trace.kernels[i]).correlation is not None else -1
            for i in cols.index.tolist()
        ],
        dtype=np.int64,
    )
    if corr.size == 0:
        return np.zeros(0)
    at = np.clip(np.searchsorted(corr, kernel_corr), 0, corr.size - 1)
    found = corr[at] == kernel_corr
    lags: Floats = cols.ts_us[found] - ends[at[found]]
    return lags


def short_gaps_ms(trace: Trace, max_gap_us: float) -> float:
    """Per step: device idle time in gaps shorter than `max_gap_us` between device activities."""
    ranges, steps = typical_window(trace)
    cols = gpu_columns(trace)  # the union of device busy ranges, cached by the breakdown
    bs, be = cols.busy_starts, cols.busy_ends
    gaps = bs[1:] - be[:-1]
    same_step = in_ranges(bs[1:], ranges) & in_ranges(be[:-1], ranges)
    short = gaps[(gaps > 0) & (gaps < max_gap_us) & same_step]
    return float(short.sum()) / 1e3 / steps


def _median(values: npt.NDArray[np.float64]) -> float:
    # np.median's first call imports numpy.lib machinery (~50 ms); a sort is enough here.
    ordered = np.sort(values)
    return float(ordered[ordered.size // 2]) if ordered.size else 0.0


def _named(
    trace: Trace,
    cols: KernelColumns,
    tiny: npt.NDArray[np.bool_],
    calls: tuple[Ints, Floats, Floats, Ints],
) -> list[EvidenceValue]:
    """The most frequent tiny kernels with their calls per step and the op that launched them."""
    counts = np.bincount(cols.name_index[tiny], minlength=len(cols.names))
    top = [int(i) for i in np.argsort(-counts)[:6] if counts[i] > 0]
    corr, start, end, tid = calls
    ops = {}
    for i in top:
        kernel = trace.kernels[int(cols.index[np.flatnonzero(cols.name_index == i)[0]])]
        at = int(
            np.searchsorted(corr, kernel.correlation if kernel.correlation is not None else -1)
        )
        found = at < corr.size and corr[at] == kernel.correlation
        ops[i] = (
            launching_op(trace, int(tid[at]), float(start[at]), float(end[at])) if found else None
        )
    every = per_name_count(cols)
    return [
        {
            "kernel": short_name(cols.names[i]),
            "calls_per_step": round(float(every[i]) / cols.steps, 1),
            "median_us": round(_median(cols.dur_us[cols.name_index == i]), 1),
            "launched_by": op.name if (op := ops[i]) is not None else "unknown",
        }
        for i in top
    ]


@rule("launch-bound")
def launch_bound(
    trace: Trace,
    *,
    tiny_kernel_us: float = 10.0,
    min_tiny_kernels_per_step: int = 100,
    max_queue_us: float = 50.0,
    min_starved_fraction: float = 0.5,
    max_gap_us: float = 200.0,
    min_idle_fraction: float = 0.10,
) -> list[Finding]:
    """Fire when tiny kernels keep the GPU waiting for launches a large share of the step."""
    cols = kernel_columns(trace)
    step_ms = trace.breakdown.median_step_ms
    tiny = cols.dur_us <= tiny_kernel_us
    tiny_per_step = int(tiny.sum()) / cols.steps
    if step_ms <= 0 or tiny_per_step < min_tiny_kernels_per_step:
        return []
    calls = launch_calls(trace)
    matched = launch_lag_us(trace, cols, calls)
    starved = float((matched <= max_queue_us).mean()) if matched.size else 0.0
    idle_ms = short_gaps_ms(trace, max_gap_us)
    if starved < min_starved_fraction or idle_ms < min_idle_fraction * step_ms:
        return []
    evidence = _evidence(trace, cols, tiny, calls, starved, idle_ms)
    kernels_per_step = len(cols.dur_us) / cols.steps
    return [
        Finding(
            rule="launch-bound",
            severity=Severity.HIGH if idle_ms >= 0.25 * step_ms else Severity.MEDIUM,
            summary=(
                f"{tiny_per_step:,.0f} kernels per step run under {tiny_kernel_us:g} us; "
                f"{starved:.0%} start as soon as they are launched, and the GPU idles "
                f"{idle_ms:.1f} ms per step ({idle_ms / step_ms:.0%}) between them waiting on Python"
            ),
            evidence=evidence,
            fix=FIX,
            saving_ms=round(max(0.0, idle_ms - kernels_per_step * RESIDUAL_GAP_US / 1e3), 3),
            saving_method=(
                f"idle gaps under {max_gap_us:g} us between kernels, minus {RESIDUAL_GAP_US:g} us "
                "per kernel that remain with CUDA graphs: an upper bound (host work that is not "
                "launching stays)"
            ),
        )
    ]


def _evidence(
    trace: Trace,
    cols: KernelColumns,
    tiny: npt.NDArray[np.bool_],
    calls: tuple[Ints, Floats, Floats, Ints],
    starved: float,
    idle_ms: float,
) -> dict[str, EvidenceValue]:
    in_steps = in_ranges(calls[1], typical_window(trace)[0])
    launch_ms = float((calls[2] - calls[1])[in_steps].sum()) / 1e3 / cols.steps
    return {
        "kernels_per_step": round(len(cols.dur_us) / cols.steps, 1),
        "tiny_kernels_per_step": round(int(tiny.sum()) / cols.steps, 1),
        "tiny_kernel_gpu_ms_per_step": round(float(cols.dur_us[tiny].sum()) / 1e3 / cols.steps, 3),
        "launch_api_ms_per_step": round(launch_ms, 3),
        "median_kernel_us": round(_median(cols.dur_us), 2),
        "starved_kernel_fraction": round(starved, 3),
        "launch_gap_idle_ms_per_step": round(idle_ms, 3),
        "launch_gap_idle_step_fraction": round(idle_ms / trace.breakdown.median_step_ms, 3),
        "top_tiny_kernels": _named(trace, cols, tiny, calls),
    }
