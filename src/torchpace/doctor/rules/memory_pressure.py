"""Reserved GPU memory near the device's capacity, or far above what tensors use (fragmentation)."""

from __future__ import annotations

import math
from collections import Counter

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.events import MemoryTimeline
from torchpace.trace.model import Trace

GIB = 2**30
FIX_CAPACITY = """\
# Make headroom: recompute activations, or a smaller micro-batch with accumulation
from torch.utils.checkpoint import checkpoint
hidden = checkpoint(block, hidden, use_reentrant=False)   # per transformer block / stage
# bf16 autocast halves activation memory; set_to_none=True frees gradients between steps
optimizer.zero_grad(set_to_none=True)"""
FIX_FRAGMENTATION = """\
# Let the caching allocator grow segments instead of keeping many fixed-size blocks
#   PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py
# Variable shapes fragment the cache: bucket sequence lengths (torchpace.data length bucketing)
# and warm the allocator up on the longest batch first."""
FIX_POOL = """\
# Nothing to fix if the pool is meant to take the device: it is sized once, up front.
# To leave headroom for other processes and allocator overhead, size it smaller:
#   vLLM: LLM(model, gpu_memory_utilization=0.85)
#   your own pool: from torch.cuda.mem_get_info() minus a margin"""
NO_SAVING = (
    "no step-time estimate: pressure costs allocator retries (cudaFree/cudaMalloc, see "
    "allocator-churn) and out-of-memory risk, not a fixed time per step"
)


def device_memory(trace: Trace) -> MemoryTimeline:
    """Device memory events with allocator totals; NotApplicable when the trace lacks them."""
    if not trace.has_gpu:
        raise NotApplicable("the trace recorded no GPU activity: no device memory to judge", "")
    memory = trace.device_memory
    if len(memory) == 0:
        raise NotApplicable(
            "the trace has no GPU memory events", "torch.profiler.profile(profile_memory=True)"
        )
    if not any(v == v for v in memory.total_reserved):  # all NaN (v == v is false only for NaN)
        raise NotApplicable(
            "the memory events do not record Total Reserved/Allocated (traces before torch 1.11)",
            "torch >= 1.11 with torch.profiler.profile(profile_memory=True)",
        )
    return memory


def _busiest(memory: MemoryTimeline) -> tuple[int, MemoryTimeline]:
    """The device with the most memory events (ties: the lowest id), and only its events."""
    counts = Counter(memory.device_id)
    device = max(sorted(counts), key=counts.__getitem__)
    if len(counts) == 1:
        return device, memory
    return device, memory.select([i for i, d in enumerate(memory.device_id) if d == device])


def _nanmax(values: list[float]) -> float:
    """The largest value that is not NaN (NaN when there is none)."""
    if values and values[0] == values[0]:
        # Every comparison with NaN is false, so once max() holds a number no NaN replaces it.
        return max(values)
    return max((v for v in values if v == v), default=math.nan)


def _nanmin(values: list[float]) -> float:
    """The smallest value that is not NaN (NaN when there is none)."""
    return min((v for v in values if v == v), default=math.nan)


def _pool(
    memory: MemoryTimeline, capacity: int, floor: float, evidence: dict[str, EvidenceValue]
) -> Finding:
    """Tensors hold nearly all of the reserved memory through the whole trace: a pool taken once
    by design (vLLM's KV cache), which neither grows nor makes the allocator retry. Pressure would
    show as allocations coming and going near the limit."""
    low, high = _nanmin(memory.total_reserved), _nanmax(memory.total_reserved)
    summary = (
        f"{high / capacity:.0%} of the device's {_gib(capacity)} GiB is reserved up front and held "
        f"flat (reserved {_gib(low)}-{_gib(high)} GiB, tensors never below {_gib(floor)} GiB): "
        "a memory pool reserved by design (e.g. vLLM's KV cache), not allocator pressure; "
        f"{_gib(capacity - high)} GiB remain for anything else"
    )
    evidence = {**evidence, "allocated_floor_bytes": int(floor), "pool_held_flat": True}
    return _finding(summary, Severity.LOW, evidence, FIX_POOL)


def _capacity(trace: Trace, device: int) -> int | None:
    for d in trace.devices:
        if d.id == device and d.total_memory_bytes:
            return d.total_memory_bytes
    return trace.info.device_memory_bytes


def _gib(value: float) -> float:
    return round(value / GIB, 2)


@rule("memory-pressure")
def memory_pressure(
    trace: Trace,
    *,
    near_capacity_fraction: float = 0.90,
    min_unused_bytes: int = 2 * GIB,
    max_allocated_ratio: float = 0.60,
    pool_floor_fraction: float = 0.95,
) -> list[Finding]:
    """Fire on peak reserved >= `near_capacity_fraction` of the device, or reserved far above use."""
    memory = device_memory(trace)
    device, memory = _busiest(memory)
    reserved = _nanmax(memory.total_reserved)
    allocated = _nanmax(memory.total_allocated)
    capacity = _capacity(trace, device)
    evidence: dict[str, EvidenceValue] = {
        "device_index": device,
        "peak_reserved_bytes": int(reserved),
        "peak_allocated_bytes": int(allocated),
        "capacity_bytes": capacity,
        "reserved_capacity_fraction": round(reserved / capacity, 3) if capacity else None,
        "allocated_reserved_ratio": round(allocated / reserved, 3) if reserved else None,
    }
    if capacity and reserved >= near_capacity_fraction * capacity:
        share = reserved / capacity
        floor = _nanmin(memory.total_allocated)
        if floor >= pool_floor_fraction * reserved:
            return [_pool(memory, capacity, floor, evidence)]
        summary = (
            f"Reserved GPU memory peaks at {_gib(reserved)} GiB, {share:.0%} of the device's "
            f"{_gib(capacity)} GiB: the allocator is near out-of-memory"
        )
        # No saving to weigh: the severity policy keeps an unestimated trace finding at MEDIUM.
        return [_finding(summary, Severity.MEDIUM, evidence, FIX_CAPACITY)]
    unused = reserved - allocated
    if reserved and unused >= min_unused_bytes and allocated / reserved <= max_allocated_ratio:
        summary = (
            f"The allocator keeps {_gib(reserved)} GiB reserved but tensors never use more than "
            f"{_gib(allocated)} GiB: {_gib(unused)} GiB of cached blocks are idle (fragmentation "
            "or an earlier, larger peak)"
        )
        busy = capacity is not None and reserved >= 0.5 * capacity
        severity = Severity.MEDIUM if busy else Severity.LOW
        return [_finding(summary, severity, evidence, FIX_FRAGMENTATION)]
    return []


def _finding(
    summary: str, severity: Severity, evidence: dict[str, EvidenceValue], fix: str
) -> Finding:
    return Finding(
        rule="memory-pressure",
        severity=severity,
        summary=summary,
        evidence=evidence,
        fix=fix,
        saving_ms=None,
        saving_method=NO_SAVING,
    )
