"""A DataLoader that shards a map-style dataset across ranks and reshuffles every epoch."""

from __future__ import annotations

from typing import Any

from torch.utils.data import DataLoader, Dataset, DistributedSampler, IterableDataset

from torchpace.dist.setup import info


class EpochLoader(DataLoader):  # type: ignore[type-arg]
    """A DataLoader that calls `sampler.set_epoch(n)` at the start of each pass over it.

    DistributedSampler shuffles with seed + epoch; forgetting set_epoch repeats one order every
    epoch. Each `iter()` here uses the next epoch; call `set_epoch(n)` to resume at epoch n.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next pass uses (e.g. when resuming from a checkpoint)."""
        self.epoch = epoch

    def __iter__(self) -> Any:
        if isinstance(self.sampler, DistributedSampler):  # always, when built by loader()
            self.sampler.set_epoch(self.epoch)
        self.epoch += 1
        return super().__iter__()


def loader(
    dataset: Dataset[Any],
    *,
    batch_size: int,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
    **loader_options: Any,
) -> EpochLoader:
    """A loader over this rank's shard of `dataset` (all of it in a single process).

    Under DDP a DistributedSampler gives each rank a disjoint 1/world_size of the indices (padded
    by repeating a few when the size does not divide, unless drop_last); set_epoch is handled.
    Other options (num_workers, pin_memory, ...) go to DataLoader.
    """
    if isinstance(dataset, IterableDataset):
        raise TypeError(
            "loader() needs a map-style dataset (with __getitem__ and __len__); an "
            "IterableDataset must shard itself by rank and worker"
        )
    if "sampler" in loader_options or "batch_sampler" in loader_options:
        raise TypeError("loader() picks the sampler itself; build a DataLoader to use your own")
    where = info()
    # One sampler for both cases: the order depends only on (seed, epoch), so runs resume exactly.
    sampler: DistributedSampler[Any] = DistributedSampler(
        dataset,
        num_replicas=where.world_size,
        rank=where.rank,
        shuffle=shuffle,
        seed=seed,
        drop_last=drop_last,
    )
    return EpochLoader(
        dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last, **loader_options
    )
