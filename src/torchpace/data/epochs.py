"""Correct epochs with persistent workers: `set_epoch` that reaches the dataset copies in workers.

With `persistent_workers=True` the DataLoader pickles (or forks) the dataset into each worker once,
at the first `iter(loader)`, and reuses those copies for every later epoch. The sampler stays in the
main process: `iter(loader)` calls `iter(batch_sampler)` and immediately sends the first
`prefetch_factor * num_workers` batches of indices, so the order of epoch e is drawn at `iter()`
and `sampler.set_epoch(e)` works as long as it is called before `iter(loader)`. The dataset's own
`set_epoch`, though, only changes the main-process copy: the workers keep epoch 0 for ever.
`epoch_aware(dataset)` keeps the epoch in a shared-memory tensor that the worker copies read before
each item (map-style) or each `iter()` (iterable), and `set_epoch(loader, e)` sets the sampler, the
batch sampler and the dataset in one call.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from torchpace.errors import UsageError


class SharedEpoch:
    """An epoch counter in shared memory: written in the main process, read inside workers."""

    def __init__(self, epoch: int = 0) -> None:
        # A shared tensor survives both fork (inherited) and spawn (torch's pickler sends a handle).
        self._value = torch.full((1,), epoch, dtype=torch.int64).share_memory_()

    def set(self, epoch: int) -> None:
        """Store `epoch` where every worker copy sees it."""
        self._value.fill_(int(epoch))

    def get(self) -> int:
        """The current epoch."""
        return int(self._value.item())


class _EpochForwarding:
    """Shared behaviour of the two wrappers: forward attributes, replay set_epoch in workers.

    `loader.dataset` is then the wrapper; the original is `.dataset` and its attributes forward.
    """

    # Marker read by set_epoch(): this dataset's epoch reaches persistent workers.
    epoch_shared_with_workers = True

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        start = getattr(dataset, "epoch", 0)
        self.shared_epoch = SharedEpoch(start if isinstance(start, int) else 0)
        self._seen: int | None = None

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch here and, through shared memory, in every worker copy."""
        self.shared_epoch.set(epoch)
        self._sync()

    def _sync(self) -> None:
        epoch = self.shared_epoch.get()
        if epoch != self._seen:
            self._seen = epoch
            if callable(getattr(self.dataset, "set_epoch", None)):
                self.dataset.set_epoch(epoch)

    def __getattr__(self, name: str) -> Any:
        # Guard dunders and our own fields: unpickling looks them up before __init__ has run.
        if name.startswith("__") or name in ("dataset", "shared_epoch", "_seen", "reject_none"):
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __len__(self) -> int:
        return len(self.dataset)


class EpochAwareDataset(_EpochForwarding, Dataset):  # type: ignore[misc]
    """A map-style dataset whose `set_epoch` reaches its copies in persistent workers.

    An error raised while loading an item gets a note naming the index: the DataLoader re-raises
    worker errors in the main process with their traceback text, notes included. With
    `reject_none`, an item that is None raises TypeError naming its index, where collating it
    would fail without naming it (torch's default_collate, pad_collate).
    """

    def __init__(self, dataset: Any, *, reject_none: bool = False) -> None:
        super().__init__(dataset)
        self.reject_none = reject_none

    def __getitem__(self, index: Any) -> Any:
        self._sync()
        try:
            item = self.dataset[index]
        except Exception as error:
            if hasattr(error, "add_note"):
                error.add_note(f"torchpace: raised while loading dataset index {index!r}")
            raise
        if item is None and self.reject_none:
            raise TypeError(_none_item(self.dataset, index))
        return item

    def __getitems__(self, indices: list[Any]) -> list[Any]:
        # Keep a dataset's batched fetch (the DataLoader looks for __getitems__ on the wrapper).
        batched = getattr(self.dataset, "__getitems__", None)
        if batched is None:
            return [self[index] for index in indices]
        self._sync()
        items: list[Any] = batched(indices)
        if self.reject_none:
            for index, item in zip(indices, items, strict=False):
                if item is None:
                    raise TypeError(_none_item(self.dataset, index, "__getitems__"))
        return items


def _none_item(dataset: Any, index: Any, method: str = "__getitem__") -> str:
    return (
        f"dataset index {index!r} is None: {type(dataset).__name__}.{method} returned no sample "
        "for it (a path without `return`?), and a batch cannot hold None; return the sample, or "
        "skip such items with a collate_fn of your own, e.g. collate_fn=lambda batch: "
        "default_collate([s for s in batch if s is not None])"
    )


class EpochAwareIterableDataset(_EpochForwarding, IterableDataset):  # type: ignore[misc]
    """An iterable dataset whose `set_epoch` reaches its copies in persistent workers."""

    def __iter__(self) -> Any:
        self._sync()
        return iter(self.dataset)


def epoch_aware(dataset: Any) -> Any:
    """Wrap a dataset that has `set_epoch` so the epoch reaches persistent workers; else return it."""
    if getattr(dataset, "epoch_shared_with_workers", False):
        return dataset
    if not callable(getattr(dataset, "set_epoch", None)):
        return dataset
    if isinstance(dataset, IterableDataset):
        return EpochAwareIterableDataset(dataset)
    return EpochAwareDataset(dataset)


def _targets(loader: DataLoader[Any]) -> list[Any]:
    batch_sampler = loader.batch_sampler
    candidates = [loader.sampler, batch_sampler, getattr(batch_sampler, "sampler", None)]
    unique: dict[int, Any] = {}
    for obj in candidates:
        if obj is not None and callable(getattr(obj, "set_epoch", None)):
            unique.setdefault(id(obj), obj)
    return list(unique.values())


def _check_dataset_reaches_workers(loader: DataLoader[Any]) -> None:
    dataset = loader.dataset
    if not callable(getattr(dataset, "set_epoch", None)):
        return
    if loader.num_workers == 0 or not loader.persistent_workers:
        return
    if getattr(dataset, "epoch_shared_with_workers", False):
        return
    raise UsageError(
        f"set_epoch: {type(dataset).__name__}.set_epoch would only change the main-process copy; "
        "the copies inside persistent workers keep their old epoch. Build the loader with "
        "DataLoader(epoch_aware(dataset), ...) or fast_loader(dataset, ...)"
    )


def set_epoch(target: Any, epoch: int) -> None:
    """Set the epoch on a loader's sampler, batch sampler and dataset (workers included).

    Call it before `iter(loader)`: that is when the DataLoader draws the epoch's indices.
    `target` may be a DataLoader, a DevicePrefetcher (anything with `.loader`), or any object
    with `set_epoch`.
    """
    if epoch < 0:
        raise ValueError(f"epoch must be >= 0, got {epoch}")
    loader = getattr(target, "loader", target)
    if not isinstance(loader, DataLoader):
        if not callable(getattr(target, "set_epoch", None)):
            raise TypeError(
                f"set_epoch() needs a DataLoader or an object with set_epoch, got "
                f"{type(target).__name__}"
            )
        target.set_epoch(epoch)
        return
    _check_dataset_reaches_workers(loader)
    for obj in _targets(loader):
        obj.set_epoch(epoch)
    if callable(getattr(loader.dataset, "set_epoch", None)):
        loader.dataset.set_epoch(epoch)  # type: ignore[attr-defined]
