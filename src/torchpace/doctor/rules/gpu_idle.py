"""The GPU idles a large share of each step; says what the host was doing meanwhile."""

from __future__ import annotations

import itertools

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.doctor.sync_facts import sync_points
from torchpace.trace import intervals as iv
from torchpace.trace.blocking import driver_init_calls
from torchpace.trace.breakdown import gpu_columns, phase_ranges, top_level_ranges
from torchpace.trace.events import Step
from torchpace.trace.model import Trace

# Idle causes, in the order they claim idle time (an idle instant goes to the first that covers it):
# what blocks the host outright (driver start-up, allocator calls) before what it chose to do.
CAUSES = (
    "launch_overhead", "context_init", "allocator", "data", "sync", "communication",
    "host_compute", "other",
)  # fmt: skip
WORDS = {
    "launch_overhead": "launch overhead", "context_init": "driver start-up (context, modules)",
    "allocator": "allocator calls", "data": "data", "sync": "waiting on syncs",
    "communication": "communication", "host_compute": "host compute", "other": "other",
}  # fmt: skip
# Idle that other rules estimate (or that never repeats) is not this rule's saving.
ESTIMATED_ELSEWHERE = frozenset({"context_init", "allocator", "data", "sync"})
FIXES = {
    "launch_overhead": (
        "# kernels are shorter than their launch: fuse them and launch once\n"
        "model = torch.compile(model)                      # fuses elementwise chains\n"
        'model = torch.compile(model, mode="reduce-overhead")  # + CUDA graphs for static shapes\n'
        "# or raise the batch size so each kernel does more work"
    ),
    "context_init": (
        "# one-off: the process's first CUDA/HIP calls create the context and load kernels\n"
        "# profile steady steps: torch.profiler.schedule(wait=1, warmup=3, active=5)\n"
        "torch.cuda.init()  # or torch.zeros(1, device='cuda'): pay it before the loop, once"
    ),
    "allocator": (
        "# the host waits in cudaMalloc/cudaFree (hipMalloc/hipFree): see allocator-churn\n"
        "# keep PyTorch's caching allocator on: unset PYTORCH_NO_CUDA_MEMORY_CACHING\n"
        "# (PYTORCH_NO_HIP_MEMORY_CACHING on ROCm) and never call torch.cuda.empty_cache() per step"
    ),
    "data": "# the GPU waits for batches: see the dataloader-stall and pageable-copy findings",
    "sync": "# the GPU drains at every host sync: see the sync-point finding",
    "communication": (
        "# the host waits on collectives: overlap them with compute\n"
        "model = DDP(model, bucket_cap_mb=25, gradient_as_bucket_view=True)\n"
        "with model.no_sync(): ...  # accumulate gradients locally between syncs"
    ),
    "host_compute": (
        "# the host is too slow to keep the GPU fed (Python, CPU-side ops)\n"
        "model = torch.compile(model)  # fewer, larger kernels per Python call\n"
        "# move CPU preprocessing into the DataLoader workers or onto the GPU"
    ),
    "other": "# the host is between ops (Python overhead, logging): profile with with_stack=True",
}


def _idle_gaps(trace: Trace, steps: list[Step]) -> list[iv.Interval]:
    """The GPU's idle ranges within the steps."""
    busy = gpu_columns(trace).busy
    return [gap for step in steps for gap in busy.gaps(step.ts_us, step.end_us)]


def _cause_sets(trace: Trace) -> dict[str, list[iv.Interval]]:
    ranges = phase_ranges(trace)
    return {
        "context_init": [(r.ts_us, r.end_us) for r in driver_init_calls(trace)],
        "allocator": [(r.ts_us, r.end_us) for r in trace.runtime_of_kind("malloc", "free")],
        "data": ranges.dataloader + ranges.h2d,
        "sync": [(p.ts_us, p.end_us + p.gpu_idle_after_us) for p in sync_points(trace)],
        "communication": ranges.communication,
        "host_compute": top_level_ranges(trace, {trace.main_tid} | ranges.backward_tids),
    }


def idle_causes(trace: Trace, steps: list[Step], launch_gap_us: float) -> dict[str, float]:
    """Idle microseconds over `steps`, split by cause (see CAUSES for the precedence)."""
    every = _idle_gaps(trace, steps)
    gaps = [(s, e) for s, e in every if e - s >= launch_gap_us]
    long_us = sum(e - s for s, e in gaps)
    out = {"launch_overhead": sum(e - s for s, e in every) - long_us}
    idle = iv.Coverage.of_disjoint(gaps)
    # Precedence without interval subtraction: a cause gets what the union grows by.
    claimed = iv.Coverage.of(())
    before = 0.0
    for cause, ranges in _cause_sets(trace).items():
        claimed = iv.Coverage.of(itertools.chain(claimed.intervals(), ranges))
        after = idle.overlap_with(claimed)
        out[cause] = after - before
        before = after
    out["other"] = max(0.0, long_us - before)
    return out


@rule("gpu-idle")
def gpu_idle(
    trace: Trace, *, min_idle_fraction: float = 0.25, launch_gap_us: float = 15.0
) -> list[Finding]:
    """Flag steps in which the GPU has nothing to run for a large share of the time."""
    b = trace.breakdown
    if trace.has_gpu and b.gpu_busy_fraction is None:
        raise NotApplicable("GPU busy time cannot be measured: durations of 0 ms (see the notes)")
    if not trace.has_gpu or b.gpu_busy_fraction is None:
        raise NotApplicable(
            "the trace recorded no device activity (no kernels, copies or memsets)",
            "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
        )
    idle_fraction = 1.0 - b.gpu_busy_fraction
    if idle_fraction < min_idle_fraction:
        return []
    steps = trace.typical_steps
    idle_ms = idle_fraction * b.median_step_ms
    totals = idle_causes(trace, steps, launch_gap_us)
    whole = sum(totals.values())
    # Split the median idle time in the proportions measured over all typical steps.
    by_cause = {c: idle_ms * totals.get(c, 0.0) / whole if whole > 0 else 0.0 for c in CAUSES}
    return [_finding(idle_fraction, b.median_step_ms, by_cause, len(steps))]


def _finding(
    idle_fraction: float, step_ms: float, by_cause: dict[str, float], steps: int
) -> Finding:
    idle_ms = idle_fraction * step_ms
    top = max(CAUSES, key=lambda c: by_cause[c])
    others = sum(v for c, v in by_cause.items() if c not in ESTIMATED_ELSEWHERE)
    shares = ", ".join(
        f"{WORDS[c]} {v:.1f} ms"
        for c, v in sorted(by_cause.items(), key=lambda kv: -kv[1])
        if v >= 0.05 * idle_ms
    )
    return Finding(
        rule="gpu-idle",
        severity=Severity.HIGH if idle_fraction >= 0.5 else Severity.MEDIUM,
        summary=(
            f"The GPU idles {idle_fraction:.0%} of each step ({idle_ms:.1f} of "
            f"{step_ms:.1f} ms); the host meanwhile: {shares}"
        ),
        evidence={
            "idle_fraction": round(idle_fraction, 4),
            "idle_ms_per_step": round(idle_ms, 3),
            "step_ms": round(step_ms, 3),
            "idle_ms_by_cause": {f"{c}_ms": round(v, 3) for c, v in by_cause.items()},
            "top_cause_name": top,
            "steps_count": steps,
        },
        fix=FIXES[top],
        saving_ms=round(others, 3),
        saving_method=(
            "upper bound: idle time per step from launch overhead, host compute, "
            "communication and other host time (data, sync and allocator idle is estimated by "
            "dataloader-stall, sync-point and allocator-churn; context start-up is one-off)"
        ),
    )
