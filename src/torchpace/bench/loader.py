"""The input side of a configuration: batch order, DataLoader settings, and getting batches on device."""

from __future__ import annotations

import collections
import gc
import os
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Sampler

from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.workloads.base import Batch, Workload
from torchpace.data import (
    BucketBatchSampler,
    DevicePrefetcher,
    TokenBudgetBatchSampler,
    fast_loader,
    set_epoch,
)
from torchpace.data._tree import map_tensors

# Padded lengths round up to this (pad_collate's default; it keeps bf16/fp16 matmuls tensor-core sized).
PAD_MULTIPLE = 8


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
    lengths = workload.lengths
    assert lengths is not None, "bucketing applies only to variable-length workloads"
    if config.batching == "bucket":
        return BucketBatchSampler(lengths, workload.batch_size, seed=seed, drop_last=True)
    budget = workload.token_budget or workload.batch_size * _median(lengths)
    return TokenBudgetBatchSampler(lengths, budget, seed=seed, multiple_of=PAD_MULTIPLE)


def _median(values: Sequence[int]) -> int:
    return sorted(values)[len(values) // 2]


def make_loader(workload: Workload, config: RunConfig, seed: int) -> DataLoader[Any]:
    """The DataLoader this configuration reads from: torchpace.data.fast_loader, every setting explicit."""
    workers = 0 if config.data_on_device else config.num_workers
    if workers:
        freeze_inherited_heap_in_workers()
    return fast_loader(
        workload.dataset,
        batch_sampler=batch_sampler(workload, config, seed),
        num_workers=workers,
        collate_fn=workload.collate,
        pin_memory=config.pin_memory and not config.data_on_device,
        persistent_workers=config.persistent_workers and workers > 0,
    )


_FREEZE_REGISTERED = False


def freeze_inherited_heap_in_workers() -> None:
    """Make every process forked from now on freeze the heap it inherits, once per process.

    A forked DataLoader worker inherits the parent's unreachable cycles not yet collected (the
    last configuration's model, batches, prefetcher). When the worker's garbage collector frees
    one holding a CUDA tensor, the tensor's destructor calls CUDA in a process without a CUDA
    context: cudaErrorInitializationError, and the worker dies (the stacked configuration with
    8 workers, on an H200). Frozen objects are never collected in the worker; its own are, and
    the parent collects its garbage as before.
    """
    global _FREEZE_REGISTERED
    if not _FREEZE_REGISTERED:
        os.register_at_fork(after_in_child=gc.freeze)
        _FREEZE_REGISTERED = True


def to_device(obj: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """Move every tensor in a (nested) batch to `device` (the batch walker of torchpace.data)."""
    return map_tensors(obj, lambda t: t.to(device, non_blocking=non_blocking))


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

    def _epochs(self) -> Iterator[Batch]:
        counted = _Counted(self.loader, self.workload, self._units)
        # One prefetcher for the whole run: its side stream is created once, not per epoch.
        prefetcher = DevicePrefetcher(counted, self.device) if self.config.prefetcher else None
        non_blocking = self.config.pin_memory
        while True:
            if prefetcher is not None:
                yield from prefetcher
            else:
                for batch in counted:
                    yield to_device(batch, self.device, non_blocking)

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


class _Counted:
    """One epoch per iter(): sets the epoch (sampler order), then yields host batches, counting them."""

    def __init__(
        self, loader: DataLoader[Any], workload: Workload, units: collections.deque[int]
    ) -> None:
        self.loader, self.workload, self.units, self.epoch = loader, workload, units, 0

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Batch]:
        set_epoch(self.loader, self.epoch)
        self.epoch += 1
        for batch in self.loader:
            self.units.append(self.workload.count_units(batch))
            yield batch
