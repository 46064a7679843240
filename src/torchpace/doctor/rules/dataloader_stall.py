"""Steps wait on the DataLoader for the next batch instead of computing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import rule
from torchpace.trace.breakdown import is_dataloader
from torchpace.trace.model import Trace
from torchpace.trace.stats import median
from torchpace.trace.summary import Phase

if TYPE_CHECKING:
    from torchpace.doctor.live import Inspection

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


@dataclass(frozen=True)
class _Stall:
    """What the trace shows and what the worker model predicts, in milliseconds per step."""

    wait: float
    step: float
    gpu: float | None
    current: int  # workers in use (0: the main process loads)
    workers: int  # workers suggested
    iterator: str
    steps: int
    residual_fraction: float
    counted: bool = True  # False: workers are in use but the trace does not say how many

    @property
    def fraction(self) -> float:
        return self.wait / self.step if self.step > 0 else 0.0

    @property
    def period(self) -> float:
        """How often the loader delivers a batch with the suggested workers."""
        if self.current == 0:  # the measured single-process load time, split across workers
            return self.wait / self.workers
        return self.step * self.current / self.workers  # the loader sets the pace now

    @property
    def saving(self) -> float:
        rest = self.step - self.wait + self.residual_fraction * self.wait
        return max(0.0, self.step - max(rest, self.period, self.gpu or 0.0))

    def method(self) -> str:
        period = (
            f"per-batch load / {self.workers} workers"
            if self.current == 0
            else f"step x {self.current} / {self.workers} workers"
        )
        return METHOD.format(residual=self.residual_fraction, period=period)


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
    wait = median(s.phase_ms[Phase.DATALOADER] for s in typical)
    step = b.median_step_ms
    if step <= 0 or wait / step < min_wait_fraction or wait < min_wait_ms:
        return []
    iterator = _iterator(trace)
    current, workers = _workers(live, assumed_workers)
    if iterator.startswith("_SingleProcess"):
        current = 0
    counted = True
    if iterator.startswith("_MultiProcessing") and current == 0:
        current, workers, counted = 1, 2, False  # count unknown: the model doubles the workers
    gpu = b.gpu_busy_fraction * step if b.gpu_busy_fraction is not None else None
    stall = _Stall(
        wait, step, gpu, current, workers, iterator, len(typical), residual_fraction, counted
    )
    return [_finding(stall)]


def _finding(st: _Stall) -> Finding:
    where = "in the main process (num_workers=0)" if st.current == 0 else "from the workers"
    return Finding(
        rule="dataloader-stall",
        severity=Severity.HIGH if st.fraction >= 0.30 else Severity.MEDIUM,
        summary=(
            f"Each step waits {st.wait:.1f} ms ({st.fraction:.0%} of {st.step:.1f} ms) for the "
            f"next batch {where}; about {st.saving:.1f} ms per step can be saved"
        ),
        evidence={
            "wait_ms": round(st.wait, 3),
            "wait_fraction": round(st.fraction, 4),
            "step_ms": round(st.step, 3),
            "rest_of_step_ms": round(st.step - st.wait, 3),
            "gpu_busy_ms": round(st.gpu, 3) if st.gpu is not None else None,
            "current_workers_count": st.current if st.counted else None,
            "suggested_workers_count": st.workers if st.counted else None,
            "suggested_workers_factor": round(st.workers / st.current, 2) if st.current else None,
            "loader_iterator_name": st.iterator,
            "steps_count": st.steps,
        },
        fix=FIX.format(workers=st.workers if st.counted else "2 * N  # N: your current count"),
        saving_ms=round(st.saving, 3),
        saving_method=st.method(),
        caveat=(
            "workers share the host's CPU cores with the training process; on a machine "
            "with few cores the saving is smaller"
        ),
    )
