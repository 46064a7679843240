"""cudaMalloc/cudaFree inside the training loop: the caching allocator keeps missing."""

from __future__ import annotations

import msgspec

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.capture import capture_ranges
from torchpace.trace.events import RuntimeCall
from torchpace.trace.model import Trace, step_sums
from torchpace.trace.stats import fmt_bytes, median

FIX = """\
# 1. allocate the biggest batch's memory once, before the loop
from torchpace.train import warmup_memory
warmup_memory(lambda b: loss_fn(model(b)), longest_batch, model=model)  # one fwd+bwd
# plain PyTorch: run forward+backward once on the longest batch, then zero the grads
# 2. fewer distinct shapes: batch similar lengths together
from torchpace.data import BucketBatchSampler
loader = DataLoader(dataset, batch_sampler=BucketBatchSampler(lengths, batch_size=batch_size))
# 3. let segments grow instead of fragmenting (set before CUDA starts)
#    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py
# and never call torch.cuda.empty_cache() inside the loop"""


def _after_warmup(trace: Trace, warmup_fraction: float) -> tuple[float, int, str]:
    """(cut-off time, number of periods after it, what the cut-off is)."""
    steps = trace.steps
    if not steps:
        return float("inf"), 1, ""
    # The first step, and any later one labelled warm-up (trace/warmup.py), fill the cache.
    warm = max(1, sum(1 for s in steps if s.warmup))
    if trace.info.step_source != "window" and warm < len(steps):
        what = "the first profiled step" if warm == 1 else f"the {warm} warm-up steps"
        return steps[warm].ts_us, len(steps) - warm, f"per step after {what}"
    what = "the only profiled step" if trace.info.step_source == "profiler-step" else "the trace"
    why = "" if trace.info.step_source == "profiler-step" else " (no steps: that part is warm-up)"
    cutoff = steps[0].ts_us + warmup_fraction * steps[0].dur_us
    return cutoff, 1, f"after the first {warmup_fraction:.0%} of {what}{why}"


def _reserved_swing(trace: Trace, cutoff: float) -> tuple[float, float]:
    """(the largest fall of reserved device memory after the cut-off, its peak), in bytes.

    A fall is memory the cache gave back to the device (empty_cache, a retried allocation) and
    will ask for again; reserved memory that only grows is a cache filling up, however far.
    """
    mem = trace.device_memory
    reserved = [
        r for t, r in zip(mem.ts_us, mem.total_reserved, strict=True) if t >= cutoff and r == r
    ]  # r == r: not NaN
    fall, high = 0.0, 0.0
    for r in reserved:
        high = max(high, r)
        fall = max(fall, high - r)
    return fall, high


def _cold_fill(trace: Trace, cutoff: float, calls: list[RuntimeCall]) -> bool:
    """Whether the allocations after the cut-off are a cold cache filling up, not churn: no block
    is freed and then allocated again, or reserved memory (where recorded) only grows."""
    freed = False
    for call in calls:
        if call.kind == "free":
            freed = True
        elif freed:
            break  # an allocation after a free
    else:
        return True
    fall, peak = _reserved_swing(trace, cutoff)
    return peak > 0 and fall == 0


@rule("allocator-churn")
def allocator_churn(
    trace: Trace,
    *,
    min_calls_per_step: float = 1.0,
    min_swing_fraction: float = 0.10,
    warmup_fraction: float = 0.25,
) -> list[Finding]:
    """Flag device allocations/frees after warm-up, and reserved memory that swings."""
    if not trace.runtime:
        raise NotApplicable(
            "the trace recorded no CUDA/HIP runtime calls (CPU-only run or no CUDA activity)",
            "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
        )
    cutoff, periods, when = _after_warmup(trace, warmup_fraction)
    calls = _outside_capture(
        trace, [r for r in trace.runtime_of_kind("malloc", "free") if r.ts_us >= cutoff]
    )
    if periods == 1 and _cold_fill(trace, cutoff, calls):
        # No steps to compare: allocations that are never given back and asked for again are
        # the cache's first fill (a single cold forward), which a warm loop does not repeat.
        calls = []
    per_step = _per_step if periods >= 3 else _mean
    churn = _Churn(
        mallocs=per_step(trace, cutoff, periods, [(r.ts_us, r.kind == "malloc") for r in calls]),
        frees=per_step(trace, cutoff, periods, [(r.ts_us, r.kind == "free") for r in calls]),
        call_ms=per_step(
            trace, cutoff, periods, [(r.ts_us, r.dur_us / 1e3) for r in calls], share=True
        ),
        swing_peak=_reserved_swing(trace, cutoff),
        periods=periods,
        when=when,
    )
    swings = (
        churn.swing_peak[1] > 0 and churn.swing_peak[0] >= min_swing_fraction * churn.swing_peak[1]
    )
    if churn.mallocs + churn.frees < min_calls_per_step and not swings:
        return []
    return [_finding(trace, churn, swings)]


def _outside_capture(trace: Trace, calls: list[RuntimeCall]) -> list[RuntimeCall]:
    """The calls outside CUDA-graph capture: a capture allocates its graph's pool once, by design."""
    phases = capture_ranges(trace)
    if not phases:
        return calls
    return [r for r in calls if not any(lo <= r.ts_us <= hi for lo, hi in phases)]


def _mean(
    trace: Trace, cutoff: float, periods: int, items: list[tuple[float, float]], share: bool = False
) -> float:
    return sum(v for _, v in items) / periods


def _per_step(
    trace: Trace, cutoff: float, periods: int, items: list[tuple[float, float]], share: bool = False
) -> float:
    """Median over the steps after the cut-off: churn recurs, a one-time top-up does not.

    `share`: the median share of each step the items take, times the median step, so that a
    time per step is measured against the steps it comes from (it never exceeds the step).
    """
    steps = [s for s in trace.steps if s.ts_us >= cutoff]
    totals = step_sums(steps, items)
    if not totals:
        return 0.0
    if not share:
        return median(totals)
    shares = [t / (s.dur_us / 1e3) for t, s in zip(totals, steps, strict=True) if s.dur_us > 0]
    return median(shares) * trace.median_step_ms() if shares else 0.0


class _Churn(msgspec.Struct, frozen=True):
    """Allocator calls after warm-up (per step) and the reserved-memory swing (bytes)."""

    mallocs: float
    frees: float
    call_ms: float
    swing_peak: tuple[float, float]
    periods: int
    when: str


def _finding(trace: Trace, c: _Churn, swings: bool) -> Finding:
    step = trace.median_step_ms()
    api = "hip" if trace.info.device_kind == "rocm" else "cuda"
    summary = f"{c.mallocs:.0f} {api}Malloc and {c.frees:.0f} {api}Free {c.when}, {c.call_ms:.1f} ms in them"
    swing, peak = c.swing_peak
    if swings:
        summary += f"; reserved memory swings by {fmt_bytes(swing, decimal=True)} (peak {fmt_bytes(peak, decimal=True)})"
    return Finding(
        rule="allocator-churn",
        severity=Severity.LOW,  # set by the severity policy from the saving
        summary=summary,
        evidence={
            "malloc_per_step_count": round(c.mallocs, 2),
            "free_per_step_count": round(c.frees, 2),
            "alloc_call_ms_per_step": round(c.call_ms, 3),
            "step_ms": round(step, 3),
            "reserved_swing_bytes": int(swing),
            "reserved_peak_bytes": int(peak),
            "periods_count": c.periods,
        },
        fix=FIX,
        saving_ms=round(c.call_ms, 3),
        saving_method=(
            "host time inside cudaMalloc/cudaFree after warm-up, per step (cudaFree also "
            "waits for the device); a warm cache serves these from its pool"
        ),
        caveat="with fewer than two profiled steps the warm-up cut-off is a guess"
        if len(trace.steps) < 2
        else "",
    )
