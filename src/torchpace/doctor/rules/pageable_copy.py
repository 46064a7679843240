"""Host-to-device copies read from pageable memory (or synchronously): they block the host."""

from __future__ import annotations

import msgspec

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.blocking import host_memory_blocks, upload_queue_waits_us
from torchpace.trace.events import GpuEvent, RuntimeCall
from torchpace.trace.model import Trace, median_per_step
from torchpace.trace.stacks import SourceLocation, most_hit
from torchpace.trace.stats import fmt_bytes

FIX = """\
# torchpace: pinned batches, copied on a side stream while the previous step computes
from torchpace.data import DevicePrefetcher
for x, y in DevicePrefetcher(loader, device="cuda"):
    ...

# plain PyTorch: page-locked batches and asynchronous copies
loader = DataLoader(dataset, batch_size=batch_size, num_workers=4, pin_memory=True)
x = x.to("cuda", non_blocking=True)  # from pinned memory this returns at once
# tensors you build yourself: t = t.pin_memory() once, then .to("cuda", non_blocking=True)"""


def _locations(trace: Trace, copies: list[GpuEvent]) -> tuple[SourceLocation, ...]:
    ops = (trace.launcher(copy) for copy in copies)
    return most_hit(trace.user_frame(trace.top_op(op)) for op in ops if op is not None)


@rule("pageable-copy")
def pageable_copy(
    trace: Trace, *, min_bytes_per_step: float = 1e6, min_ms_per_step: float = 0.2
) -> list[Finding]:
    """Flag HtoD memcpys whose source is pageable host memory (tensors not pinned)."""
    if not trace.has_gpu:
        raise NotApplicable(
            "the trace recorded no device activity (no kernels, copies or memsets)",
            "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
        )
    issued = [(c, trace.runtime_call_of(c)) for c in trace.copies if c.direction == "HtoD"]
    blocking = [(c, r) for c, r in issued if host_memory_blocks(c, r)]
    if not blocking:
        return []
    copies = [c for c, _ in blocking]
    calls = [r for _, r in blocking if r is not None]
    per_step = _PerStep.of(trace, copies, calls)
    if per_step.nbytes < min_bytes_per_step and per_step.copy_ms < min_ms_per_step:
        return []
    # ROCm writes `Host` whether pinned or not: there the blocking call is what the trace shows.
    unsaid = any(c.src_kind == "Host" for c in copies)
    return [_finding(per_step, trace.median_step_ms(), _locations(trace, copies), unsaid)]


class _PerStep(msgspec.Struct, frozen=True):
    """Medians per typical step of the pageable host-to-device copies."""

    count: float
    nbytes: float
    copy_ms: float
    host_ms: float

    @classmethod
    def of(cls, trace: Trace, copies: list[GpuEvent], calls: list[RuntimeCall]) -> _PerStep:
        """The medians of these copies and of the host time in their calls."""
        # A pageable copy is staged through a driver buffer: the call returns only when done.
        # Its first part, waiting for the GPU's earlier work (trace/blocking.py), is the GPU's
        # pace: pinning does not remove it.
        queued = upload_queue_waits_us(trace)
        return cls(
            count=median_per_step(trace, ((c.ts_us, 1.0) for c in copies)),
            nbytes=median_per_step(trace, ((c.ts_us, float(c.bytes or 0)) for c in copies)),
            copy_ms=median_per_step(trace, ((c.ts_us, c.dur_us / 1e3) for c in copies)),
            host_ms=median_per_step(
                trace, ((r.ts_us, (r.dur_us - queued.get(id(r), 0.0)) / 1e3) for r in calls)
            ),
        )


def _finding(
    m: _PerStep, step: float, locations: tuple[SourceLocation, ...], unsaid: bool
) -> Finding:
    what = (
        "read host memory the trace does not mark as pinned (ROCm writes `Host` for both), "
        "through calls that return only once the copy is done,"
        if unsaid
        else "read pageable memory"
    )
    return Finding(
        rule="pageable-copy",
        severity=Severity.LOW,  # the policy's, from the saving (doctor/severity.py)
        summary=(
            f"{m.count:.0f} host-to-device copies per step ({fmt_bytes(m.nbytes, decimal=True)}, "
            f"{m.copy_ms:.2f} ms on the GPU) {what} and block the host "
            f"{m.host_ms:.2f} ms per step"
        ),
        evidence={
            "copies_per_step_count": m.count,
            "h2d_pageable_bytes_per_step": int(m.nbytes),
            "copy_ms_per_step": round(m.copy_ms, 3),
            "host_blocked_ms_per_step": round(m.host_ms, 3),
            "bandwidth_gb_per_s": round(m.nbytes / (m.copy_ms * 1e6), 2) if m.copy_ms > 0 else None,
            "step_ms": round(step, 3),
        },
        fix=FIX,
        saving_ms=round(m.host_ms, 3),
        saving_method=(
            "host time inside the pageable copy calls per step, less the time they first waited "
            "for the GPU's earlier work: from pinned memory with non_blocking=True the call "
            "returns at once and the copy overlaps compute"
        ),
        locations=locations,
        caveat="the host time turns into step time only while the host is on the critical path",
    )
