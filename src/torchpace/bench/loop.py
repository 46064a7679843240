"""One timed training run of one configuration: the loop a user would write, instrumented."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from torchpace.bench import _train
from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.loader import BatchStream
from torchpace.bench.memory import PeakMemory
from torchpace.bench.workloads.base import Batch, Workload
from torchpace.environment.tf32 import conv_switches, matmul_precision, set_matmul_precision

Step = Callable[[Batch], torch.Tensor]


@dataclass(frozen=True)
class Measurement:
    """What one repeat of one configuration measured."""

    units_per_s: float
    step_ms: list[float]
    data_wait_fraction: float
    peak_memory_bytes: int
    peak_memory_kind: str
    first_step_ms: float
    losses: list[float]
    steps: int
    units: int
    # Units (samples, tokens) of each measured step; empty when a peer's loop does not count them.
    step_units: list[int] = field(default_factory=list)


class Clock:
    """Step boundaries: CUDA events on a GPU (no host sync per step), perf_counter on CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: list[Any] = []

    def mark(self) -> None:
        """Record a step boundary (asynchronously on CUDA)."""
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def intervals_ms(self) -> list[float]:
        """Milliseconds between consecutive marks; call after a device sync."""
        pairs = zip(self.marks, self.marks[1:], strict=False)
        if self.cuda:
            return [float(a.elapsed_time(b)) for a, b in pairs]
        return [(b - a) * 1000.0 for a, b in pairs]


def sync(device: torch.device) -> None:
    """Wait for the device: only at the edges of the timed window, never inside it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def backend_flags(config: RunConfig) -> Iterator[None]:
    """Start each configuration from the baseline's global flags, and restore the caller's afterwards."""
    # The naive baseline: strict fp32 convolutions, no autotuning.
    flags = [(torch.backends.cudnn, "benchmark", False)]
    flags += [(owner, attr, value) for _, owner, attr, value in conv_switches(tf32=False)]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in flags]
    precision = matmul_precision()
    set_matmul_precision("highest")
    for owner, name, value in flags:
        setattr(owner, name, value)
    try:
        yield
    finally:
        set_matmul_precision(precision)
        for owner, name, value in saved:
            setattr(owner, name, value)


def run_config(
    workload: Workload, config: RunConfig, settings: BenchSettings, device: torch.device
) -> Measurement:
    """Build a fresh model (same seed), train warmup + steps on this configuration, and measure."""
    memory = PeakMemory(device)
    with backend_flags(config):
        torch.manual_seed(settings.seed)
        model = _train.prepare_model(workload.build_model(), config, settings, device)
        optimizer = workload.make_optimizer(model.parameters())
        step = _train.make_step(model, optimizer, workload.loss, config, device)
        stream = _stream(workload, config, settings, device)
        try:
            if config.warmup_memory:
                _train.warm_memory(model, workload, config, settings, device)
            was_reset = memory.reset()
            result = timed(step, stream, config, settings, device)
        finally:
            stream.close()
        peak = memory.read()
    return Measurement(**result, peak_memory_bytes=peak, peak_memory_kind=memory.kind(was_reset))


def _stream(
    workload: Workload, config: RunConfig, settings: BenchSettings, device: torch.device
) -> BatchStream | Generator[tuple[Batch, int], None, None]:
    stream = BatchStream(workload, config, settings, device)
    if not config.data_on_device:
        return stream
    try:
        pairs = stream.take(settings.warmup + settings.steps)
    finally:
        stream.close()
    sync(device)
    # The input-pipeline ceiling: batches put on the device before timing, replayed (close: no-op).
    return (pair for pair in pairs)


def timed(
    step: Step,
    stream: Iterator[tuple[Batch, int]],
    config: RunConfig,
    settings: BenchSettings,
    device: torch.device,
) -> dict[str, Any]:
    """Train warmup + steps from `stream`, timing the steps after the warmup (the peers' loop too)."""
    clock, fetch_s, units = Clock(device), 0.0, 0
    step_units: list[int] = []
    losses: list[torch.Tensor | float] = []
    start = time.perf_counter()
    first_step_ms = 0.0
    window_start = start
    for i in range(settings.warmup + settings.steps):
        if i == settings.warmup:
            sync(device)
            window_start = time.perf_counter()
            clock.mark()
        fetched = time.perf_counter()
        batch, n = next(stream)
        waited = time.perf_counter() - fetched
        loss = step(batch)
        if config.sync_free_logging:
            losses.append(loss.detach())
        else:
            losses.append(loss.item())  # the naive logging: a host-device sync every step
        if i == 0:
            sync(device)
            first_step_ms = (time.perf_counter() - start) * 1000.0
        if i >= settings.warmup:
            clock.mark()
            fetch_s += waited
            units += n
            step_units.append(n)
    sync(device)
    wall = time.perf_counter() - window_start
    return {
        "units_per_s": units / wall,
        "step_ms": clock.intervals_ms(),
        "data_wait_fraction": min(1.0, fetch_s / wall),
        "first_step_ms": first_step_ms,
        # Sync-free logging kept device tensors: converted once, after the timed window.
        "losses": [float(x) for x in losses],
        "steps": settings.steps,
        "units": units,
        "step_units": step_units,
    }
