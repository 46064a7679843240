"""Loader facts judge the user's dataset, not torchpace's epoch wrapper around it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch.utils.data import IterableDataset, TensorDataset

from torchpace.data import fast_loader
from torchpace.runner.run import RunResult
from torchpace.runner.sensors.loader import static_facts

DoctorRun = Callable[..., RunResult]


class Unsharded(IterableDataset):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[int]:
        return iter(range(8))


def test_fast_loader_wrapper_is_looked_through() -> None:
    loader = fast_loader(TensorDataset(torch.arange(8)), batch_size=2, num_workers=1)
    assert type(loader.dataset).__name__ != "TensorDataset"  # the wrapper is there...
    assert static_facts(loader, None).dataset_type == "TensorDataset"  # ...and seen through


def test_an_unsharded_iterable_under_the_wrapper_is_still_caught() -> None:
    loader = fast_loader(Unsharded(), batch_size=2, num_workers=2)
    facts = static_facts(loader, None)
    assert facts.iterable and facts.dataset_type == "Unsharded"
    assert facts.shards_by_worker is False


def test_a_random_split_names_the_dataset_it_takes_from() -> None:
    """Lightning's autoencoder example: random_split's Subset read as "Subset computes each
    sample again every epoch"."""
    from torch.utils.data import DataLoader, random_split

    train, _ = random_split(TensorDataset(torch.arange(10)), [8, 2])
    assert static_facts(DataLoader(train), None).dataset_type == "TensorDataset (Subset)"


class Counted(IterableDataset):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[int]:
        return iter(range(8))

    def __len__(self) -> int:
        return 8


def test_epoch_length_is_read_from_map_style_loaders_only() -> None:
    from torch.utils.data import DataLoader, RandomSampler

    data = TensorDataset(torch.arange(100))
    assert static_facts(DataLoader(data, batch_size=8), None).batches_per_epoch == 13
    endless = RandomSampler(data, replacement=True, num_samples=10**10)  # minGPT's trainer
    assert static_facts(DataLoader(data, sampler=endless, batch_size=64), None).batches_per_epoch \
        == -(-(10**10) // 64)  # fmt: skip
    # An IterableDataset's len() is remembered by torch (a warning once it yields more): not asked.
    counted = DataLoader(Counted(), batch_size=2)
    assert static_facts(counted, None).batches_per_epoch is None
    assert counted._IterableDataset_len_called is None


def test_each_epochs_first_batch_is_timed(doctor_run: DoctorRun) -> None:
    """iter(loader) to its first batch, in every phase: the workers' restart that loader-config's
    persistent_workers finding weighs."""
    ran = doctor_run("loader_epochs.py")
    assert ran.exit_code == 0, ran.error
    (loader,) = ran.inspection.loaders
    assert loader.epochs_started == 2 and len(loader.first_batch_ms) == 2
    assert all(t > 0 for t in loader.first_batch_ms)
