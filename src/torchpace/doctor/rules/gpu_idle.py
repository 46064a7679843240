"""The GPU idles a large share of each step; says what the host was doing meanwhile."""

from __future__ import annotations

from torchpace.doctor.facts import facts_of
from torchpace.doctor.facts.idle import CAUSES, LAUNCH_GAP_US
from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.model import Trace

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


@rule("gpu-idle")
def gpu_idle(
    trace: Trace, *, min_idle_fraction: float = 0.25, launch_gap_us: float = LAUNCH_GAP_US
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
    if 1.0 - b.gpu_busy_fraction < min_idle_fraction:
        return []
    split = facts_of(trace).idle_split(launch_gap_us)
    assert split is not None  # the busy share is known (checked above)
    return [_finding(split.idle_fraction, split.step_ms, split.by_cause_ms, split.steps)]


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
        severity=Severity.MEDIUM,  # the policy's, from the saving (doctor/severity.py)
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
