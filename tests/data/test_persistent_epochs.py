"""set_epoch reaches samplers and the dataset copies inside persistent workers."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, IterableDataset

from torchpace.data import (
    BucketBatchSampler,
    DevicePrefetcher,
    EpochAwareDataset,
    epoch_aware,
    fast_loader,
    set_epoch,
)
from torchpace.errors import UsageError


class EpochRows(Dataset):
    """Item i is (i, the epoch this copy of the dataset believes it is in)."""

    def __init__(self, n: int) -> None:
        self.n, self.epoch = n, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[int, int]:
        return index, self.epoch


class EpochStream(IterableDataset):
    """Yields (row, epoch seen inside the worker)."""

    def __init__(self, n: int) -> None:
        self.n, self.epoch = n, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        return iter([(i, self.epoch) for i in range(self.n)])


def _epoch(loader) -> tuple[list[int], set[int]]:
    order, epochs = [], set()
    for indices, seen in loader:
        order += indices.tolist()
        epochs |= set(seen.tolist())
    return order, epochs


def test_persistent_workers_see_each_epoch_in_sampler_order():
    dataset = EpochRows(37)
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=3)
    loader = fast_loader(dataset, 4, num_workers=2, sampler=sampler)
    assert loader.persistent_workers
    workers = None
    for epoch in range(4):
        set_epoch(loader, epoch)
        order, seen = _epoch(loader)
        reference = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=3)
        reference.set_epoch(epoch)
        assert order == list(reference)
        assert seen == {epoch}
        pids = [w.pid for w in loader._iterator._workers]
        assert workers in (None, pids)  # the same processes every epoch: they really persist
        workers = pids
    del loader


def test_stock_persistent_workers_keep_epoch_zero_in_the_dataset():
    # The bug set_epoch fixes: the main-process set_epoch never reaches the worker copies.
    dataset = EpochRows(8)
    loader = DataLoader(dataset, batch_size=4, num_workers=2, persistent_workers=True)
    _epoch(loader)
    dataset.set_epoch(1)
    assert _epoch(loader)[1] == {0}
    del loader


def test_set_epoch_refuses_a_dataset_its_workers_cannot_see():
    loader = DataLoader(EpochRows(8), batch_size=4, num_workers=1, persistent_workers=True)
    with pytest.raises(UsageError, match=r"EpochRows\.set_epoch would only change the main"):
        set_epoch(loader, 1)


def test_iterable_dataset_epoch_reaches_persistent_workers():
    loader = DataLoader(
        epoch_aware(EpochStream(6)), batch_size=3, num_workers=2, persistent_workers=True
    )
    for epoch in range(3):
        set_epoch(loader, epoch)
        order, seen = _epoch(loader)
        assert seen == {epoch}
        assert sorted(order) == sorted(list(range(6)) * 2)  # unsharded: once per worker
    del loader


def test_batch_sampler_epochs_with_persistent_workers():
    lengths = torch.randint(1, 50, (40,)).tolist()
    sampler = BucketBatchSampler(lengths, 4, seed=1)
    loader = fast_loader(EpochRows(40), batch_sampler=sampler, num_workers=2)
    for epoch in range(3):
        set_epoch(loader, epoch)
        batches = [indices.tolist() for indices, _ in loader]
        assert batches == [step[0] for step in sampler.global_plan(epoch)]
    del loader


def test_set_epoch_through_a_prefetcher():
    dataset = EpochRows(10)
    prefetcher = DevicePrefetcher(fast_loader(dataset, 5, num_workers=1), "cpu")
    prefetcher.set_epoch(2)
    assert _epoch(prefetcher)[1] == {2}
    set_epoch(prefetcher, 3)
    assert _epoch(prefetcher)[1] == {3}
    del prefetcher


def test_wrapper_forwards_attributes_and_length():
    wrapped = epoch_aware(EpochRows(5))
    assert isinstance(wrapped, EpochAwareDataset)
    assert len(wrapped) == 5 and wrapped.n == 5
    assert epoch_aware(wrapped) is wrapped
    plain = [1, 2, 3]
    assert epoch_aware(plain) is plain


def test_set_epoch_rejects_bad_input():
    with pytest.raises(ValueError, match="epoch must be >= 0, got -1"):
        set_epoch(DataLoader(EpochRows(2)), -1)
    with pytest.raises(TypeError, match="needs a DataLoader or an object with set_epoch, got int"):
        set_epoch(3, 0)


class CountingSampler:
    """Counts the indices the DataLoader has drawn from it."""

    def __init__(self, n: int) -> None:
        self.n, self.drawn = n, 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        for index in range(self.n):
            self.drawn += 1
            yield index


def test_the_loader_draws_an_epochs_first_indices_at_iter():
    # Why set_epoch must come before iter(loader): the order is fixed when iter() returns.
    sampler = CountingSampler(100)
    loader = DataLoader(
        EpochRows(100), sampler=sampler, num_workers=2, prefetch_factor=3, persistent_workers=True
    )
    for _ in range(2):  # the first iter() starts the workers, the second reuses them
        sampler.drawn = 0
        iterator = iter(loader)
        assert sampler.drawn == 3 * 2  # prefetch_factor x num_workers, before any next()
        for _ in iterator:
            pass
    del iterator, loader
