"""A cheap throughput meter: samples/s, tokens/s, step time, data-wait share, MFU, GPU state.

Cheap means no host-device sync per step: timestamps are taken on the host, and counts given as
tensors (e.g. non-padding tokens) stay on the device until `stats()` sums them with one sync.
Host timestamps measure when the CPU got through each step; averaged over a window that is the
device's throughput too (the CPU cannot run ahead of the GPU by more than the launch queue).
Pass `sync=True` for exact per-step device times, at the cost of a synchronize per step.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import torch

from torchpace.environment.tf32 import matmul_precision, matmul_tf32
from torchpace.monitor.nvml import GpuStats, gpu_stats
from torchpace.monitor.peaks import Peak, PeakDtype, lookup_peak
from torchpace.policy.devices import default_device
from torchpace.trace.stats import median
from torchpace.train.precision import Precision

T = TypeVar("T")
Count = int | torch.Tensor


@dataclass(frozen=True)
class ThroughputStats:
    """Figures over the meter's window (the last `window` steps)."""

    steps: int
    step_ms: float  # mean wall time per step, data wait included
    step_ms_median: float
    samples_per_s: float
    tokens_per_s: float | None  # None when no tokens were counted
    data_wait_fraction: float | None  # None unless the loader was wrapped with track()
    flops_per_s: float | None  # None without flops_per_step
    mfu: float | None  # None without a FLOP count or a known peak
    peak: Peak | None
    gpu: GpuStats | None


class _Step(NamedTuple):  # a tuple, not a frozen dataclass: built every step, so keep it cheap
    seconds: float
    wait_seconds: float
    samples: Count
    tokens: Count | None


def _peak_dtype(dtype: PeakDtype | Precision) -> PeakDtype:
    if not isinstance(dtype, Precision):
        return dtype
    if dtype.mode != "fp32":
        return dtype.mode
    return "tf32" if matmul_tf32() or matmul_precision() != "highest" else "fp32"


def _total(counts: Iterable[Count]) -> float:
    values = list(counts)
    tensors = [c for c in values if isinstance(c, torch.Tensor)]
    total = float(sum(c for c in values if not isinstance(c, torch.Tensor)))
    if tensors:
        # float32 works on every device (MPS has no float64); rounding is ~1e-7 relative.
        sums = torch.stack([t.detach().sum().float() for t in tensors])
        total += float(sums.sum().item())  # the one sync
    return total


class Throughput:
    """Call `step(samples=..., tokens=...)` once per optimizer step; read `stats()` when logging.

    Wrap the loader with `track()` to measure how long each step waited for its batch, or give the
    wait with `add_wait()` where a framework owns the loop. The first `step()` starts the clock (it
    usually includes compilation and allocator warm-up). `clock` returns seconds
    (time.perf_counter by default; tests pass a fake one).
    """

    def __init__(
        self,
        *,
        window: int = 50,
        flops_per_step: float | None = None,
        dtype: PeakDtype | Precision = "bf16",
        peak_flops: float | None = None,
        device: torch.device | str | None = None,
        sync: bool = False,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if window < 1:
            raise ValueError(f"Throughput window must be >= 1 step; got {window!r}")
        self.window: deque[_Step] = deque(maxlen=window)
        self.flops_per_step = flops_per_step
        self.device = torch.device(device) if device is not None else default_device()
        self.peak = self._peak(_peak_dtype(dtype), peak_flops)
        self.sync = sync
        self.clock = clock
        self.total_steps = 0
        self._last: float | None = None
        self._wait = 0.0
        self._tracking = False

    def _peak(self, dtype: PeakDtype, peak_flops: float | None) -> Peak | None:
        if peak_flops is not None:
            return Peak(str(self.device), dtype, float(peak_flops), "given by the caller")
        if self.device.type != "cuda" or not torch.cuda.is_available():
            return None
        return lookup_peak(torch.cuda.get_device_name(self.device), dtype)

    def track(self, batches: Iterable[T]) -> Iterator[T]:
        """Yield from `batches`, timing how long each `next()` blocks: the data wait."""
        self._tracking = True
        iterator = iter(batches)
        while True:
            start = self.clock()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            self._wait += self.clock() - start
            yield batch

    def add_wait(self, seconds: float) -> None:
        """Count `seconds` of the current step as waiting for data (for loops a framework owns)."""
        self._tracking = True
        self._wait += max(0.0, seconds)

    def restart(self) -> None:
        """Forget the steps so far; the next `step()` starts the clock again.

        For a pause that is not training (profiling with its overhead, an evaluation, writing a
        checkpoint): the figures then describe the steps after it only.
        """
        self.window.clear()
        self._last = None
        self._wait = 0.0

    def step(self, samples: Count = 0, tokens: Count | None = None) -> None:
        """Mark the end of one step that processed `samples` (and `tokens`); no device sync."""
        if self.sync and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # asked for: exact per-step device time
        now = self.clock()
        if self._last is not None:
            self.window.append(_Step(now - self._last, self._wait, samples, tokens))
        self._last = now
        self._wait = 0.0
        self.total_steps += 1

    def stats(self) -> ThroughputStats | None:
        """Figures over the window; None before two steps. Syncs once if counts are tensors."""
        if not self.window:
            return None
        steps = list(self.window)
        seconds = sum(s.seconds for s in steps)
        tokens = [s.tokens for s in steps if s.tokens is not None]
        flops = self.flops_per_step * len(steps) / seconds if self.flops_per_step else None
        return ThroughputStats(
            steps=len(steps),
            step_ms=1000 * seconds / len(steps),
            step_ms_median=1000 * median(s.seconds for s in steps),
            samples_per_s=_total(s.samples for s in steps) / seconds,
            tokens_per_s=_total(tokens) / seconds if tokens else None,
            data_wait_fraction=sum(s.wait_seconds for s in steps) / seconds
            if self._tracking
            else None,
            flops_per_s=flops,
            mfu=flops / self.peak.flops_per_s if flops is not None and self.peak else None,
            peak=self.peak,
            gpu=gpu_stats(self.device) if self.device.type == "cuda" else None,
        )


def format_stats(stats: ThroughputStats) -> str:
    """One line for logs and the progress bar."""
    parts = [f"{stats.samples_per_s:,.1f} samples/s", f"{stats.step_ms:.1f} ms/step"]
    if stats.tokens_per_s is not None:
        parts.append(f"{stats.tokens_per_s:,.0f} tok/s")
    if stats.data_wait_fraction is not None:
        parts.append(f"data wait {stats.data_wait_fraction:.0%}")
    if stats.mfu is not None:
        parts.append(f"MFU {stats.mfu:.1%}")
    if stats.gpu is not None and stats.gpu.utilization_percent is not None:
        parts.append(f"GPU {stats.gpu.utilization_percent}%")
    return " | ".join(parts)
