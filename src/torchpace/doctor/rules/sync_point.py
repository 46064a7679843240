"""The host waits for the device: .item(), nonzero, .cpu() and explicit synchronizes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from torchpace.doctor.finding import Finding, Severity, SourceLocation
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.breakdown import GpuColumns, gpu_columns
from torchpace.trace.events import RuntimeCall
from torchpace.trace.model import Trace
from torchpace.trace.stats import median_per_step

FIX = """\
# keep values on the device; read them rarely
running_loss += loss.detach()            # not loss.item() every step
if step % log_every == 0:
    print(running_loss.item() / log_every)  # one sync per log_every steps
# data-dependent shapes sync too: prefer fixed-shape ops
x = torch.where(mask, x, 0)              # not x[mask] / mask.nonzero()
# find the rest: torch.cuda.set_sync_debug_mode("warn")"""

# Ops whose result the host needs now: they copy to the host and wait for the device.
SYNC_OPS = frozenset(
    {
        "aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero",
        "aten::masked_select", "aten::_unique2", "aten::unique_consecutive", "aten::equal",
        "aten::tolist", "aten::repeat_interleave",
    }
)  # fmt: skip


@dataclass(frozen=True)
class SyncPoint:
    """One place where the host blocked on the device."""

    call: RuntimeCall
    cause: str  # the outermost op that caused it, or the runtime call for a bare synchronize
    location: SourceLocation | None
    gpu_idle_after_us: float  # how long the drained GPU then waited for new work


def _cause(trace: Trace, call: RuntimeCall) -> tuple[str, SourceLocation | None, bool]:
    chain = trace.enclosing_ops(call.tid, call.ts_us, call.end_us)
    ops = [o for o in chain if o.kind == "op" and o.name.startswith(("aten::", "c10d::"))]
    sync_ops = [o for o in ops if o.name in SYNC_OPS]
    top = sync_ops[-1] if sync_ops else (ops[-1] if ops else None)
    if top is None:
        return call.name, None, False
    h2d = top.name in ("aten::to", "aten::_to_copy", "aten::copy_") and not sync_ops
    return top.name, trace.user_frame(trace.top_op(top)), h2d


def sync_points(trace: Trace) -> list[SyncPoint]:
    """Synchronize calls and blocking device-to-host copies, with their cause and cost (cached:
    gpu-idle asks too)."""
    cached = trace._cache.get("rules:sync_points")
    if cached is not None:
        return cached  # type: ignore[return-value]
    dtoh = {c.correlation for c in trace.copies if c.direction == "DtoH"}
    calls = [
        r
        for r in trace.runtime_of_kind("sync", "memcpy")
        if r.kind == "sync" or (r.correlation in dtoh and "Async" not in r.name)
    ]
    cols = gpu_columns(trace)
    out = []
    for call in calls:
        cause, loc, h2d = _cause(trace, call)
        if h2d:
            continue  # a pageable host-to-device copy: pageable-copy reports it
        out.append(SyncPoint(call, cause, loc, _idle_after(cols, call)))
    trace._cache["rules:sync_points"] = out
    return out


def _idle_after(cols: GpuColumns, call: RuntimeCall) -> float:
    """GPU idle from the sync's end to the next device work, if the sync drained the GPU.

    The sync caused the idle only when the GPU was busy while the host waited (it drained
    the queue); if the GPU was idle already, something else starved it.
    """
    busy = cols.busy
    i, nxt = busy.next_start(call.end_us)
    if i == 0:
        return 0.0
    last_end = busy.ends[i - 1]
    if last_end > call.end_us or last_end < call.ts_us - 1.0:
        return 0.0  # still busy after the sync, or idle already before it
    return (nxt if nxt is not None else call.end_us) - call.end_us


def _locations(points: list[SyncPoint]) -> tuple[SourceLocation, ...]:
    counts = Counter(p.location for p in points if p.location is not None)
    return tuple(SourceLocation(x.file, x.line, x.function, n) for x, n in counts.most_common(5))


def _count(per_step: float) -> str:
    return f"{per_step:.0f}" if per_step >= 1 else f"{per_step:.1f}"


@rule("sync-point")
def sync_point(
    trace: Trace, *, min_syncs_per_step: float = 1.0, max_idle_after_us: float = 5_000.0
) -> list[Finding]:
    """Flag host-device synchronizations inside the training step."""
    if not trace.has_gpu or not trace.runtime:
        raise NotApplicable(
            "the trace recorded no CUDA/HIP runtime calls, so host-device syncs cannot be seen",
            "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
        )
    points = sync_points(trace)
    count = median_per_step(trace, ((p.call.ts_us, 1.0) for p in points))
    if not points or count < min_syncs_per_step:
        return []
    blocked = median_per_step(trace, ((p.call.ts_us, p.call.dur_us / 1e3) for p in points))
    # Idle longer than max_idle_after_us has other causes (data loading, the next step).
    idle = median_per_step(
        trace, ((p.call.ts_us, min(p.gpu_idle_after_us, max_idle_after_us) / 1e3) for p in points)
    )
    typical = {s.index for s in trace.typical_steps}
    in_steps = [p for p in points if (s := trace.step_at(p.call.ts_us)) and s.index in typical]
    return [_finding(trace, in_steps, count, blocked, idle, max_idle_after_us)]


def _finding(
    trace: Trace, points: list[SyncPoint], count: float, blocked: float, idle: float, cap_us: float
) -> Finding:
    step = trace.median_step_ms()
    cost = (blocked + idle) / step if step > 0 else 0.0
    causes = Counter(p.cause for p in points)
    n_steps = max(1, len(trace.typical_steps))
    top = ", ".join(f"{name} x{_count(n / n_steps)}" for name, n in causes.most_common(3))
    severity = Severity.HIGH if cost >= 0.15 else Severity.MEDIUM if cost >= 0.03 else Severity.LOW
    return Finding(
        rule="sync-point",
        severity=severity,
        summary=(
            f"The host waits for the GPU {count:.0f} times per step ({top}): "
            f"{blocked:.2f} ms blocked, then the GPU idles {idle:.2f} ms for new work"
        ),
        evidence={
            "syncs_per_step_count": count,
            "blocked_ms_per_step": round(blocked, 3),
            "gpu_idle_after_ms_per_step": round(idle, 3),
            "step_ms": round(step, 3),
            "causes_per_step_count": {k: round(v / n_steps, 2) for k, v in causes.items()},
        },
        fix=FIX,
        saving_ms=round(idle, 3),
        saving_method=(
            "GPU idle time right after each sync until the next kernel starts (the queue "
            f"the sync drained), capped at {cap_us / 1e3:.0f} ms per sync"
        ),
        locations=_locations(points),
        caveat="" if trace.has_stacks else "record with with_stack=True to get source lines",
    )
