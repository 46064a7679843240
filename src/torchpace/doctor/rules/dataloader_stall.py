"""Steps wait on the DataLoader for the next batch instead of computing."""

from __future__ import annotations

import statistics

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.live import Inspection
from torchpace.doctor.registry import rule
from torchpace.trace.breakdown import is_dataloader
from torchpace.trace.model import Trace
from torchpace.trace.summary import Phase

FIX = """\
# torchpace: workers, pinned memory, persistent workers and prefetching in one call
from torchpace.data import fast_loader, DevicePrefetcher
loader = fast_loader(dataset, batch_size=batch_size, shuffle=True)
batches = DevicePrefetcher(loader, device="cuda")  # copies batch N+1 on a side stream

# plain PyTorch
loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers={workers},
                    pin_memory=True, persistent_workers=True, prefetch_factor=2)
for x, y in loader:
    x, y = x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)"""

METHOD = (
    "new step = max(rest of step + {residual:.0%} of the load kept in the main process, "
    "{period}, GPU busy time); saving = step - new step"
)


def _workers(live: Inspection | None, default: int) -> tuple[int, int]:
    """(workers the run used, workers to suggest), from live facts when there are any."""
    current = max((lf.num_workers for lf in live.loaders), default=0) if live else 0
    cores = live.cpu_cores if live and live.cpu_cores else None
    suggest = default if cores is None else max(2, min(8, cores - 1))
    if current >= suggest:
        suggest = current * 2 if cores is None else max(current + 1, min(2 * current, cores))
    return current, suggest


def _iterator(trace: Trace) -> str:
    for op in trace.host_ops:
        if is_dataloader(op.name):
            return op.name.split("#", 1)[-1].split(".", 1)[0]
    return ""


@rule("dataloader-stall", live=True)
def dataloader_stall(
    trace: Trace,
    *,
    min_wait_fraction: float = 0.10,
    min_wait_ms: float = 1.0,
    assumed_workers: int = 4,
    residual_fraction: float = 0.10,
    live: Inspection | None = None,
) -> list[Finding]:
    """Flag steps that spend a share of their time in `enumerate(DataLoader)#...__next__`."""
    b = trace.breakdown
    typical = [s for s in b.steps if not s.outlier] or list(b.steps)
    if not typical:
        return []
    wait = statistics.median(s.phase_ms[Phase.DATALOADER] for s in typical)
    step = b.median_step_ms
    fraction = wait / step if step > 0 else 0.0
    if fraction < min_wait_fraction or wait < min_wait_ms:
        return []
    iterator = _iterator(trace)
    single = iterator.startswith("_SingleProcess")
    current, workers = _workers(live, assumed_workers)
    if single:
        current = 0
    rest = step - wait
    gpu = b.gpu_busy_fraction * step if b.gpu_busy_fraction is not None else 0.0
    # The loader's period per batch with `workers` processes: the measured single-process load
    # time split across them, or (already multi-process) the current period scaled by the ratio.
    period = wait / workers if current == 0 else step * current / workers
    new_step = max(rest + residual_fraction * wait, period, gpu)
    saving = max(0.0, step - new_step)
    where = "in the main process (num_workers=0)" if current == 0 else f"from {current} workers"
    return [
        Finding(
            rule="dataloader-stall",
            severity=Severity.HIGH if fraction >= 0.30 else Severity.MEDIUM,
            summary=(
                f"Each step waits {wait:.1f} ms ({fraction:.0%} of {step:.1f} ms) for the next "
                f"batch {where}; about {saving:.1f} ms per step can be saved"
            ),
            evidence={
                "wait_ms": round(wait, 3),
                "wait_fraction": round(fraction, 4),
                "step_ms": round(step, 3),
                "rest_of_step_ms": round(rest, 3),
                "gpu_busy_ms": round(gpu, 3) if b.gpu_busy_fraction is not None else None,
                "current_workers_count": current,
                "suggested_workers_count": workers,
                "loader_iterator_name": iterator,
                "steps_count": len(typical),
            },
            fix=FIX.format(workers=workers),
            saving_ms=round(saving, 3),
            saving_method=METHOD.format(
                residual=residual_fraction,
                period=f"per-batch load / {workers} workers"
                if current == 0
                else f"step x {current} / {workers} workers",
            ),
            caveat=(
                "workers share the host's CPU cores with the training process; on a machine "
                "with few cores the saving is smaller"
            ),
        )
    ]
