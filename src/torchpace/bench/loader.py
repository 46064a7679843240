"""The input side of a configuration: batch order, DataLoader settings, and getting batches on device."""

from __future__ import annotations

import collections
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Sampler

from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.workloads.base import Batch, Workload


class ShuffledBatches(Sampler[list[int]]):
    """Fixed-size shuffled batches; epoch e's order depends only on (seed, e), whatever loads it."""

    def __init__(self, n: int, batch_size: int, seed: int) -> None:
        self.n, self.batch_size, self.seed, self.epoch = n, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        """Select the order of the next epoch."""
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n // self.batch_size

    def __iter__(self) -> Iterator[list[int]]:
        g = torch.Generator().manual_seed(self.seed * 7919 + self.epoch)
        order = torch.randperm(self.n, generator=g).tolist()
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            yield order[start : start + self.batch_size]


def batch_sampler(workload: Workload, config: RunConfig, seed: int) -> Sampler[list[int]]:
    """The batch order for this configuration: shuffled fixed batches, length buckets or a token budget."""
    n = len(workload.dataset)  # type: ignore[arg-type]
    if config.batching == "fixed":
        return ShuffledBatches(n, workload.batch_size, seed)
    from torchpace.bench import _samplers

    assert workload.lengths is not None, "bucketing applies only to variable-length workloads"
    if config.batching == "bucket":
        return _samplers.bucket_sampler(workload.lengths, workload.batch_size, seed)
    budget = workload.token_budget or workload.batch_size * _median(workload.lengths)
    return _samplers.token_budget_sampler(workload.lengths, budget, seed)


def _median(values: Sequence[int]) -> int:
    return sorted(values)[len(values) // 2]


def make_loader(workload: Workload, config: RunConfig, seed: int) -> DataLoader[Any]:
    """The DataLoader this configuration reads from."""
    workers = 0 if config.data_on_device else config.num_workers
    return DataLoader(
        workload.dataset,
        batch_sampler=batch_sampler(workload, config, seed),
        num_workers=workers,
        collate_fn=workload.collate,
        pin_memory=config.pin_memory and not config.data_on_device,
        persistent_workers=config.persistent_workers and workers > 0,
    )


def to_device(obj: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """Move every tensor in a (nested) batch to `device`."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=non_blocking)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(x, device, non_blocking) for x in obj)
    if isinstance(obj, dict):
        return {k: to_device(v, device, non_blocking) for k, v in obj.items()}
    return obj


class BatchStream:
    """Endless (batch on device, units) pairs over epochs; close() stops the loader's workers."""

    def __init__(
        self, workload: Workload, config: RunConfig, settings: BenchSettings, device: torch.device
    ) -> None:
        self.workload, self.config, self.device = workload, config, device
        self.loader = make_loader(workload, config, settings.seed)
        self._units: collections.deque[int] = collections.deque()
        self._iter = self._epochs()

    def __iter__(self) -> Iterator[tuple[Batch, int]]:
        return self

    def __next__(self) -> tuple[Batch, int]:
        batch = next(self._iter)
        # Counted on the host before the copy, so counting never syncs with the device.
        return batch, self._units.popleft()

    def _counted(self, epoch: int) -> Iterator[Batch]:
        sampler = self.loader.batch_sampler
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)  # type: ignore[union-attr]
        for batch in self.loader:
            self._units.append(self.workload.count_units(batch))
            yield batch

    def _epochs(self) -> Iterator[Batch]:
        epoch = 0
        non_blocking = self.config.pin_memory
        while True:
            batches = self._counted(epoch)
            if self.config.prefetcher:
                from torchpace.bench import _prefetch

                yield from _prefetch.prefetch(batches, self.device)
            else:
                for batch in batches:
                    yield to_device(batch, self.device, non_blocking)
            epoch += 1

    def take(self, count: int) -> list[tuple[Batch, int]]:
        """The next `count` pairs as a list (the data-on-device ceiling keeps them all)."""
        return [next(self) for _ in range(count)]

    def close(self) -> None:
        """Stop workers now rather than at garbage collection."""
        self._iter.close()  # type: ignore[attr-defined]
        iterator = getattr(self.loader, "_iterator", None)
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()
        self.loader._iterator = None  # type: ignore[attr-defined]


class ReplayStream:
    """The input-pipeline ceiling: replays batches that were put on the device before timing."""

    def __init__(self, pairs: list[tuple[Batch, int]]) -> None:
        self._pairs = iter(pairs)

    def __iter__(self) -> Iterator[tuple[Batch, int]]:
        return self

    def __next__(self) -> tuple[Batch, int]:
        return next(self._pairs)

    def close(self) -> None:
        """Nothing to stop."""
