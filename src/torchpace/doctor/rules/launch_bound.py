"""Many tiny kernels: the GPU finishes each before the host has launched the next."""

from __future__ import annotations

from collections import Counter
from itertools import compress
from operator import and_, sub

from torchpace.doctor.facts import facts_of
from torchpace.doctor.facts.kernels import (
    KernelColumns,
    in_ranges,
    launching_op,
    per_name_count,
    short_name,
    typical_window,
)
from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import rule
from torchpace.trace.events import HostOp, RuntimeCall
from torchpace.trace.gpu import gpu_columns
from torchpace.trace.model import Trace
from torchpace.trace.stats import median

# With CUDA graphs or fused kernels the device still leaves ~1-2 us between kernels.
RESIDUAL_GAP_US = 2.0
FIX = """\
# Fewer, bigger kernels: compile the model (fuses elementwise ops; "reduce-overhead" also
# captures CUDA graphs, which replay all launches at once)
model = torch.compile(model)                       # or mode="reduce-overhead"
# Optimizers: one multi-tensor kernel instead of one per parameter
optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)   # or foreach=True
# Static shapes and no per-step .item() keep CUDA graphs possible."""


def launch_calls(trace: Trace) -> dict[int, RuntimeCall]:
    """Kernel-launch runtime calls by correlation id (the first call of an id wins)."""
    calls: dict[int, RuntimeCall] = {}
    for r in trace.runtime:
        if r.kind == "launch" and r.correlation is not None:
            calls.setdefault(r.correlation, r)
    return calls


def launch_lag_us(trace: Trace, cols: KernelColumns, calls: dict[int, RuntimeCall]) -> list[float]:
    """Per kernel with a known launch call: kernel start minus the end of that call."""
    lags = []
    for i, start in zip(cols.index, cols.ts_us, strict=True):
        corr = trace.kernels[i].correlation
        call = calls.get(corr) if corr is not None else None
        if call is not None:
            lags.append(start - call.ts_us - call.dur_us)
    return lags


def short_gaps_ms(trace: Trace, max_gap_us: float) -> float:
    """Per step: device idle time in gaps shorter than `max_gap_us` between device activities."""
    ranges, steps = typical_window(trace)
    busy = gpu_columns(trace).busy  # the union of device busy ranges, cached by the breakdown
    starts, ends = busy.starts[1:], busy.ends[:-1]  # each gap: from one range's end to the next
    inside = map(
        and_, in_ranges(starts, ranges, ordered=True), in_ranges(ends, ranges, ordered=True)
    )
    gaps = map(sub, starts, ends)
    total: float = sum(g for g in compress(gaps, inside) if 0 < g < max_gap_us)
    return total / 1e3 / steps


def _named(
    trace: Trace, cols: KernelColumns, tiny: list[bool], calls: dict[int, RuntimeCall]
) -> list[EvidenceValue]:
    """The most frequent tiny kernels with their calls per step and the op that launched them."""
    counts = Counter(n for n, t in zip(cols.name_index, tiny, strict=True) if t)
    top = [n for n, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:6]]
    first: dict[int, int] = {}  # name -> its first kernel, in trace.kernels
    durs: dict[int, list[float]] = {n: [] for n in top}
    for j, n in enumerate(cols.name_index):
        if n in durs:
            first.setdefault(n, cols.index[j])
            durs[n].append(cols.dur_us[j])
    every = per_name_count(cols)
    return [
        {
            "kernel": short_name(cols.names[n]),
            "calls_per_step": round(every[n] / cols.steps, 1),
            "median_us": round(median(durs[n]), 1),
            "launched_by": op.name if (op := _launcher(trace, first[n], calls)) else "unknown",
        }
        for n in top
    ]


def _launcher(trace: Trace, kernel: int, calls: dict[int, RuntimeCall]) -> HostOp | None:
    corr = trace.kernels[kernel].correlation
    call = calls.get(corr) if corr is not None else None
    return None if call is None else launching_op(trace, call.tid, call.ts_us, call.end_us)


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
    cols = facts_of(trace).kernels
    step_ms = trace.breakdown.median_step_ms
    tiny = [d <= tiny_kernel_us for d in cols.dur_us]
    tiny_per_step = sum(tiny) / cols.steps
    if step_ms <= 0 or tiny_per_step < min_tiny_kernels_per_step:
        return []
    calls = launch_calls(trace)
    matched = launch_lag_us(trace, cols, calls)
    starved = sum(lag <= max_queue_us for lag in matched) / len(matched) if matched else 0.0
    idle_ms = short_gaps_ms(trace, max_gap_us)
    if starved < min_starved_fraction or idle_ms < min_idle_fraction * step_ms:
        return []
    evidence = _evidence(trace, cols, tiny, calls, starved, idle_ms)
    kernels_per_step = len(cols.dur_us) / cols.steps
    return [
        Finding(
            rule="launch-bound",
            severity=Severity.MEDIUM,  # the policy's, from the saving (doctor/severity.py)
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
    tiny: list[bool],
    calls: dict[int, RuntimeCall],
    starved: float,
    idle_ms: float,
) -> dict[str, EvidenceValue]:
    launches = list(calls.values())  # in time order, as trace.runtime
    in_steps = in_ranges([r.ts_us for r in launches], typical_window(trace)[0], ordered=True)
    launch_us = sum(r.dur_us for r in compress(launches, in_steps))
    tiny_us = sum(compress(cols.dur_us, tiny))
    return {
        "kernels_per_step": round(len(cols.dur_us) / cols.steps, 1),
        "tiny_kernels_per_step": round(sum(tiny) / cols.steps, 1),
        "tiny_kernel_gpu_ms_per_step": round(tiny_us / 1e3 / cols.steps, 3),
        "launch_api_ms_per_step": round(launch_us / 1e3 / cols.steps, 3),
        "median_kernel_us": round(median(cols.dur_us), 2),
        "starved_kernel_fraction": round(starved, 3),
        "launch_gap_idle_ms_per_step": round(idle_ms, 3),
        "launch_gap_idle_step_fraction": round(idle_ms / trace.breakdown.median_step_ms, 3),
        "top_tiny_kernels": _named(trace, cols, tiny, calls),
    }
