"""The host waits for the device: .item(), nonzero, .cpu() and explicit synchronizes."""

from __future__ import annotations

from collections import Counter

import msgspec

from torchpace.doctor.facts import facts_of
from torchpace.doctor.facts.syncs import (
    IDLE_AFTER_CAP_US,
    KIND_WORDS,
    SCALAR_READ_KINDS,
    SyncPoint,
    slow_scalar_reads,
)
from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.events import HostOp
from torchpace.trace.model import Trace, median_per_step
from torchpace.trace.stacks import most_hit

# The fix for each kind of sync counted, shown most frequent first.
FIXES: dict[str, str] = {
    "item": """\
# keep values on the device; read them rarely
running_loss += loss.detach()            # not loss.item() every step
if step % log_every == 0:
    print(running_loss.item() / log_every)  # one sync per log_every steps""",
    "branch": """\
# `if tensor:` / torch.equal read the value back: decide on the device
x = torch.where(cond, a, b)              # not `a if cond else b` with a GPU tensor cond""",
    "data-dependent-shape": """\
# data-dependent shapes sync too: prefer fixed-shape ops
x = torch.where(mask, x, 0)              # not x[mask] / mask.nonzero()""",
    "d2h-copy": """\
# results for the host: one batched copy per step, not a .cpu() per tensor
preds = torch.stack(outputs).to("cpu", non_blocking=True)  # pinned, asynchronous
torch.cuda.current_stream().synchronize()                  # one wait, right before reading preds""",
    "h2d-copy": """\
# uploads from pageable memory block the host: page-locked memory, asynchronous copies
loader = DataLoader(dataset, batch_size=batch_size, pin_memory=True)
x = x.to("cuda", non_blocking=True)      # or t.pin_memory() once for tensors made by hand""",
    "d2d-copy": """\
# a blocking device-to-device copy: let it queue on the stream
dst.copy_(src, non_blocking=True)""",
    "synchronize": """\
# an explicit synchronize drains the GPU's queue: keep only one you need (timing, the end)
# torch.cuda.synchronize()               # not inside the step""",
}
FIND_THE_REST = '# find the rest: torch.cuda.set_sync_debug_mode("warn")'


def fix_for(kinds: dict[str, float]) -> str:
    """The fix for the kinds of sync counted (per step, most first), then how to find others."""
    return "\n".join([*(FIXES[k] for k in kinds if k in FIXES), FIND_THE_REST])


def _count(per_step: float) -> str:
    return f"{per_step:.0f}" if per_step >= 1 else f"{per_step:.1f}"


@rule("sync-point")
def sync_point(
    trace: Trace, *, min_syncs_per_step: float = 1.0, min_scalar_read_ms: float = 1.0
) -> list[Finding]:
    """Flag host-device synchronizations inside the training step.

    `min_scalar_read_ms`: on a trace that recorded no device activity, a scalar read this slow
    is a sync all the same (reading host memory takes microseconds).
    """
    if not trace.has_gpu and trace.devices:
        reads = slow_scalar_reads(trace, min_scalar_read_ms * 1e3)
        if reads:
            return _unrecorded_syncs(trace, reads, min_syncs_per_step)
    if not trace.has_gpu or not trace.runtime:
        raise NotApplicable(
            "the trace recorded no CUDA/HIP runtime calls, so host-device syncs cannot be seen",
            "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
        )
    points = facts_of(trace).sync_points
    own = _own_per_step(trace, points)
    if own is None or own < min_syncs_per_step:
        return []
    cost = _Cost.of(trace, points)
    typical = {s.index for s in trace.typical_steps}
    in_steps = [p for p in points if (s := trace.step_at(p.ts_us)) and s.index in typical]
    split = facts_of(trace).idle_split()
    # The idle the syncs caused, as gpu-idle splits it: one figure for one cause.
    saving = split.by_cause_ms["sync"] if split is not None else None
    return [_finding(trace, in_steps, cost, saving)]


def _own_per_step(trace: Trace, points: list[SyncPoint]) -> float | None:
    """The syncs per step that are this rule's own, None without any.

    A blocking upload from pageable memory is pageable-copy's finding (pinned memory and
    non_blocking=True remove its wait): alone it fires nothing here, beside others it counts.
    """
    own = [p for p in points if not (p.kind == "h2d-copy" and p.pageable)]
    return median_per_step(trace, ((p.ts_us, 1.0) for p in own)) if own else None


class _Cost(msgspec.Struct, frozen=True):
    """Medians per typical step of the syncs and of the GPU idle around them."""

    count: float
    blocked_ms: float
    idle_during_ms: float  # the GPU idle while the host was blocked
    # Then idle until the next device work (capped per sync); back-to-back syncs overlap here:
    # the saving is the idle in the union of the syncs' windows.
    idle_after_ms: float

    @classmethod
    def of(cls, trace: Trace, points: list[SyncPoint]) -> _Cost:
        """The medians of these sync points."""
        return cls(
            count=median_per_step(trace, ((p.ts_us, 1.0) for p in points)),
            blocked_ms=median_per_step(trace, ((p.ts_us, p.blocked_us / 1e3) for p in points)),
            idle_during_ms=median_per_step(
                trace, ((p.ts_us, p.gpu_idle_during_us / 1e3) for p in points)
            ),
            idle_after_ms=median_per_step(
                trace,
                ((p.ts_us, min(p.gpu_idle_after_us, IDLE_AFTER_CAP_US) / 1e3) for p in points),
            ),
        )


def _idle_words(idle_ms: float | None) -> str:
    if idle_ms is None:
        return ""
    return f"; the GPU idles {idle_ms:.2f} ms meanwhile and until its next work"


def _per_step(points: list[SyncPoint], n_steps: int, key: str) -> dict[str, float]:
    """How many syncs of each `kind` or `direction` per typical step, most first."""
    counts = Counter(str(getattr(p, key)) for p in points)
    return {k: round(v / n_steps, 2) for k, v in counts.most_common()}


SAVING_METHOD = (
    "upper bound: GPU idle per step while the host was blocked in a sync (the queue drained "
    "and nothing new came) and after it until the next device work (at most "
    f"{IDLE_AFTER_CAP_US / 1e3:.0f} ms per sync): what gpu-idle lists as 'waiting on syncs'; "
    "assumes the host, no longer blocked, keeps the queue full"
)


def _finding(trace: Trace, points: list[SyncPoint], cost: _Cost, saving: float | None) -> Finding:
    step = trace.median_step_ms()
    n_steps = max(1, len(trace.typical_steps))
    kinds = _per_step(points, n_steps, "kind")
    what = ", ".join(f"{_count(n)} {KIND_WORDS[k][n > 1]}" for k, n in list(kinds.items())[:3])
    causes = Counter(p.cause for p in points)
    count = cost.count
    return Finding(
        rule="sync-point",
        severity=Severity.LOW,  # set by the severity policy from the saving
        summary=(
            f"The host waits for the GPU {count:.0f} time{'s' if round(count) != 1 else ''} "
            f"per step ({what}): {cost.blocked_ms:.2f} ms blocked{_idle_words(saving)}"
        ),
        evidence={
            "syncs_per_step_count": count,
            "blocked_ms_per_step": round(cost.blocked_ms, 3),
            "gpu_idle_during_ms_per_step": round(cost.idle_during_ms, 3),
            "gpu_idle_after_ms_per_step": round(cost.idle_after_ms, 3),
            "step_ms": round(step, 3),
            "kinds_per_step_count": dict[str, EvidenceValue](kinds),
            "directions_per_step_count": dict[str, EvidenceValue](
                _per_step(points, n_steps, "direction")
            ),
            "causes_per_step_count": {k: round(v / n_steps, 2) for k, v in causes.items()},
        },
        fix=fix_for(kinds),
        saving_ms=round(saving, 3) if saving is not None else None,
        saving_method=SAVING_METHOD if saving is not None else "",
        locations=most_hit(p.location for p in points),
        caveat="" if trace.has_stacks else "record with with_stack=True to get source lines",
    )


def _unrecorded_syncs(trace: Trace, reads: list[HostOp], min_per_step: float) -> list[Finding]:
    """Scalar reads that took milliseconds on a trace recorded with CPU activities only: each
    waited for the device, which the trace does not show (so the GPU's idle is unknown)."""
    count = median_per_step(trace, ((o.ts_us, 1.0) for o in reads))
    if count < min_per_step:
        return []
    blocked = median_per_step(trace, ((o.ts_us, o.dur_us / 1e3) for o in reads))
    step = trace.median_step_ms()
    n_steps = max(1, len(trace.typical_steps))
    kinds = Counter(SCALAR_READ_KINDS[o.name] for o in reads if trace.step_at(o.ts_us))
    per_step: dict[str, float] = {k: round(v / n_steps, 2) for k, v in kinds.most_common()}
    what = ", ".join(f"{_count(n)} {KIND_WORDS[k][n > 1]}" for k, n in per_step.items())
    device = trace.devices[0].name or "GPU"
    return [
        Finding(
            rule="sync-point",
            # A few percent of the step spent blocked is worth a look (docs/severity.md); no
            # saving can be estimated, so the policy keeps it at most MEDIUM.
            severity=Severity.MEDIUM if step > 0 and blocked / step >= 0.03 else Severity.LOW,
            summary=(
                f"The host blocks {blocked:.2f} ms per step reading values back ({what}): a "
                f"read from host memory takes microseconds, so it waited for the {device} "
                "(this trace recorded CPU activity only)"
            ),
            evidence={
                "syncs_per_step_count": count,
                "blocked_ms_per_step": round(blocked, 3),
                "longest_read_ms": round(max(o.dur_us for o in reads) / 1e3, 3),
                "step_ms": round(step, 3),
                "kinds_per_step_count": dict[str, EvidenceValue](per_step),
            },
            fix=fix_for(per_step),
            saving_ms=None,
            saving_method="not estimated: the trace recorded no device activity, so the GPU's "
            "idle around these waits is unknown",
            locations=most_hit(trace.user_frame(trace.top_op(o)) for o in reads),
            caveat="record with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
            "ProfilerActivity.CUDA]) to see what the device ran meanwhile and how long it idled",
        )
    ]
