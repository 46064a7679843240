"""Loader facts judge the user's dataset, not torchpace's epoch wrapper around it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import IterableDataset, TensorDataset

from torchpace.data import fast_loader
from torchpace.runner.run import RunResult
from torchpace.runner.sensors.loader import LoaderFacts, static_facts

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
    assert loader.first_step_extra_ms == ()  # restarted inside the window: the doctor's work
    # Past the window (--full), the restart's first step is timed against its second.
    ran = doctor_run("loader_epochs.py", full=True, warmup=1, steps=1, timed_steps=0)
    assert ran.exit_code == 0, ran.error
    (loader,) = ran.inspection.loaders
    assert len(loader.first_step_extra_ms) == 1 and loader.first_step_extra_ms[0] >= 0


LOADER_FACTS = LoaderFacts(
    num_workers=0, batch_size=8, pin_memory=False, persistent_workers=False,
    prefetch_factor=None, iterable=False,
)  # fmt: skip


def test_a_restarted_epochs_first_step_is_timed_against_its_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first step's extra time over the second, between batches; not after the first epoch,
    nor without workers, nor when another loader gave a batch in between (its wait would count)."""
    from torchpace.runner.sensors import loader as sensor
    from torchpace.runner.sensors.loader import FirstSteps, LoaderRecord

    clock = iter([10.0, 11.0, 12.0, 12.5, 14.0, 14.5, 20.0, 21.0, 30.0, 32.0])
    monkeypatch.setattr(sensor.time, "perf_counter", lambda: next(clock))
    it = SimpleNamespace()
    record = LoaderRecord(replace(LOADER_FACTS, num_workers=2))
    record.first_batch_s = [1.0]  # the first epoch's
    record.came(it, 9.0, "done")  # the second epoch's first batch, at 10 s
    steps = it._torchpace_started
    assert isinstance(steps, FirstSteps) and record.first_batch_s == [1.0, 1.0]
    assert record.first_steps(it, steps, True, "done") is None  # asked at 11: the first step: 1 s
    record.came(it, steps, "done")  # the second batch at 12
    assert record.first_steps(it, steps, True, "done") == pytest.approx(0.5)  # 12.5: 0.5 s
    assert it._torchpace_started is None and record.first_step_extra_s == [0.5]
    record.came(it, 13.0, "done")  # the third epoch's first batch, at 14
    record.first_steps(it, it._torchpace_started, False, "done")  # an evaluation read between
    assert it._torchpace_started is None and record.first_step_extra_s == [0.5]
    record.came(it, 19.0, "timed")  # the fourth's at 20: the window's timed steps end at 21
    record.first_steps(it, it._torchpace_started, True, "done")
    assert it._torchpace_started is None and record.first_step_extra_s == [0.5]
    record.came(it, 29.0, "profile")  # the fifth's, profiled at 30: not timed
    assert it._torchpace_started is None
    alone = LoaderRecord(LOADER_FACTS)  # no workers: nothing started beside the step
    alone.first_batch_s = [1.0]
    alone.came(it, 31.0, "done")
    assert it._torchpace_started is None
