"""fast_loader defaults and autotune_workers."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset, default_collate

from torchpace.data import (
    EpochAwareDataset,
    autotune_workers,
    default_num_workers,
    fast_loader,
    pad_collate,
)
from torchpace.data import loaders as loaders_module
from torchpace.data.loaders import pick_plateau


@pytest.mark.parametrize(
    ("cores", "ranks", "expected"),
    [(1, 1, 0), (2, 1, 2), (3, 1, 3), (16, 1, 8), (16, 2, 8), (16, 8, 2), (64, 1, 8), (4, 8, 0)],
)
def test_default_workers_from_cores_and_ranks_with_an_accelerator(cores, ranks, expected):
    assert default_num_workers(cores, ranks, accelerator=True) == expected


@pytest.mark.parametrize(
    ("cores", "ranks", "expected"), [(2, 1, 0), (3, 1, 0), (4, 1, 2), (16, 1, 8), (16, 4, 2)]
)
def test_cpu_runs_keep_cores_for_the_math(cores, ranks, expected):
    # One policy (torchpace.fixes.workers): the math uses every core of a CPU run.
    assert default_num_workers(cores, ranks, accelerator=False) == expected


def test_default_workers_read_local_world_size(monkeypatch):
    monkeypatch.setattr(loaders_module, "usable_cores", lambda: 16)
    monkeypatch.setattr(loaders_module, "has_accelerator", lambda: True)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert default_num_workers() == 4


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_fast_loader_defaults_on_cpu(monkeypatch):
    monkeypatch.setattr(loaders_module, "usable_cores", lambda: 6)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    dataset = TensorDataset(torch.arange(10))
    loader = fast_loader(dataset, 4)
    assert isinstance(loader, DataLoader) and type(loader) is DataLoader
    # No accelerator: half of the 6 cores load, the other half keeps the math going.
    assert loader.num_workers == 3 and loader.persistent_workers and loader.prefetch_factor == 4
    assert loader.pin_memory is False  # no accelerator here
    assert isinstance(loader.dataset, EpochAwareDataset) and loader.dataset.dataset is dataset
    assert loader.dataset.tensors is dataset.tensors  # attributes forward to the wrapped dataset


def test_fast_loader_pins_memory_with_an_accelerator(monkeypatch):
    monkeypatch.setattr(loaders_module, "has_accelerator", lambda: True)
    assert fast_loader(TensorDataset(torch.arange(4)), 2, num_workers=0).pin_memory


def test_fast_loader_keeps_explicit_settings():
    dataset = TensorDataset(torch.arange(10))
    loader = fast_loader(dataset, 2, num_workers=0, shuffle=True, drop_last=True)
    assert loader.num_workers == 0 and not loader.persistent_workers and loader.drop_last
    assert loader.dataset.dataset is dataset  # wrapped without workers too: errors name the index
    loader = fast_loader(dataset, 2, num_workers=1, persistent_workers=False, prefetch_factor=2)
    assert not loader.persistent_workers and loader.prefetch_factor == 2
    with pytest.raises(ValueError, match="num_workers must be >= 0, got -2"):
        fast_loader(dataset, 2, num_workers=-2)


def test_fast_loader_delivers_every_sample_once():
    loader = fast_loader(TensorDataset(torch.arange(50)), 8, num_workers=2, shuffle=True)
    for _ in range(2):
        assert sorted(i for (b,) in loader for i in b.tolist()) == list(range(50))
    del loader


def test_pick_plateau_takes_the_smallest_count_near_the_best():
    assert pick_plateau({0: 10.0, 1: 19.0, 2: 30.0, 4: 31.0, 8: 30.5}) == 2
    assert pick_plateau({0: 5.0, 1: 4.0}) == 0
    with pytest.raises(ValueError, match="needs at least one measured worker count"):
        pick_plateau({})


class Slow(Dataset):
    """Each item sleeps: more workers help until the item rate is no longer the bottleneck."""

    def __len__(self):
        return 10_000

    def __getitem__(self, index):
        time.sleep(0.002)
        return index


def test_autotune_measures_and_returns_a_candidate():
    choice = autotune_workers(Slow(), 4, candidates=[0, 2], batches=8)
    # Sleep-bound items: two workers overlap their sleeps even on a busy two-core machine.
    assert choice == 2


def test_measure_workers_rejects_negative_counts():
    with pytest.raises(ValueError, match="candidate worker counts must be >= 0, got -1"):
        autotune_workers(Slow(), 4, candidates=[-1])


class SkipsOdd(Dataset):
    """Item i is i, but odd items are None (a __getitem__ path that forgot its return)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> int | None:
        return index if index % 2 == 0 else None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("collate", [None, pad_collate])
def test_a_none_item_names_its_index_and_the_fix(workers, collate):
    loader = fast_loader(SkipsOdd(), 4, num_workers=workers, collate_fn=collate)
    with pytest.raises(TypeError, match=r"dataset index 1 is None: SkipsOdd\.__getitem__ returned"):
        list(loader)
    del loader


def test_a_collate_fn_of_your_own_may_drop_none_items():
    def drop_none(batch):
        return default_collate([s for s in batch if s is not None])

    loader = fast_loader(SkipsOdd(), 4, num_workers=0, collate_fn=drop_none)
    assert [b.tolist() for b in loader] == [[0, 2], [4, 6]]
    unbatched = fast_loader(SkipsOdd(), None, num_workers=0)  # no collating: items as they are
    assert list(unbatched)[:2] == [0, None]


class _Reads(Dataset):
    """Items that wait on a slow read (sleep: no CPU), or compute for about as long."""

    def __init__(self, seconds: float, compute: bool) -> None:
        self.seconds, self.compute = seconds, compute

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        if not self.compute:
            time.sleep(self.seconds)
            return torch.tensor(i)
        end = time.thread_time() + self.seconds  # CPU time: the same work on a loaded machine
        while time.thread_time() < end:
            pass
        return torch.tensor(i)


def test_the_probe_tells_reading_that_waits_from_reading_that_computes():
    from torchpace.fixes.workers import waits

    slow_read = loaders_module.loading_cpu_share(_Reads(0.005, compute=False))
    decode = loaders_module.loading_cpu_share(_Reads(0.005, compute=True))
    assert slow_read is not None and waits(slow_read), slow_read
    assert decode is not None and not waits(decode), decode
    assert loaders_module.loading_cpu_share(TensorDataset(torch.arange(64))) is None  # too cheap
    assert loaders_module.loading_cpu_share(TensorDataset(torch.arange(1))) is None


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("cores", [1, 2, 4])
def test_fast_loader_uses_the_doctors_worker_policy_on_a_cpu_run(monkeypatch, cores):
    """Issue 22: on 2 cores fast_loader chose 0 workers for a dataset that waits 2 ms a sample
    (0.59x of the best stock setting) while the doctor prescribed workers. Both ask the one
    policy: for loading that waits, the doctor's advice for a long stall is fast_loader's count;
    for loading that computes on a small CPU run, the doctor says workers are unlikely to pay
    and fast_loader starts none."""
    from torchpace.fixes.workers import Host, Stall, advise

    monkeypatch.setattr(loaders_module, "usable_cores", lambda: cores)
    monkeypatch.setattr(loaders_module, "has_accelerator", lambda: False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    host = Host(cores, 1, "cpu")
    waiting = advise(host, Stall(wait_ms=500.0, step_ms=510.0, cpu_fraction=0.05))
    assert fast_loader(_Reads(0.004, compute=False), 4).num_workers == waiting.workers > 0
    computing = advise(host, Stall(wait_ms=50.0, step_ms=100.0, cpu_fraction=0.95))
    assert computing.pays == "unlikely" or cores > 2
    assert fast_loader(_Reads(0.004, compute=True), 4).num_workers == default_num_workers(
        cores, 1, accelerator=False
    )
