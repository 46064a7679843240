"""torchpace.dist un-launched: the same calls work as one process without a process group."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchpace import dist as tdist


@pytest.fixture(autouse=True)
def unlaunched(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


def test_init_without_torchrun_is_rank_0_of_1():
    where = tdist.init()
    assert (where.rank, where.world_size, where.backend, where.is_main) == (0, 1, None, True)
    assert where.device == torch.device("cpu")
    assert not torch.distributed.is_initialized()
    assert tdist.is_main()
    tdist.barrier()
    tdist.shutdown()


def test_wrap_returns_the_model_itself():
    model = nn.Linear(2, 2)
    assert tdist.wrap(model) is model


def test_wrap_refuses_data_parallel():
    with pytest.raises(TypeError, match=r"wrap\(\) got an nn.DataParallel model; pass the bare"):
        tdist.wrap(nn.DataParallel(nn.Linear(2, 2)))


def test_loader_covers_everything_and_reshuffles_per_epoch():
    loader = tdist.loader(list(range(20)), batch_size=4, seed=3)  # type: ignore[arg-type]
    first = [int(i) for b in loader for i in b]
    second = [int(i) for b in loader for i in b]
    assert sorted(first) == sorted(second) == list(range(20))
    assert first != second
    loader.set_epoch(0)  # resuming at epoch 0 replays its order exactly
    assert [int(i) for b in loader for i in b] == first


def test_loader_refuses_iterable_datasets_and_custom_samplers():
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(TypeError, match=r"loader\(\) needs a map-style dataset"):
        tdist.loader(Stream(), batch_size=2)
    with pytest.raises(TypeError, match=r"loader\(\) picks the sampler itself"):
        tdist.loader([1, 2], batch_size=2, sampler=[0, 1])  # type: ignore[arg-type]


def test_any_rank_is_the_flag_itself():
    assert tdist.any_rank(True) and not tdist.any_rank(False)


def test_bad_local_rank_is_reported(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "x")
    with pytest.raises(
        ValueError, match="LOCAL_RANK='x' is not a whole number; launch with torchrun"
    ):
        tdist.info()


def test_local_rank_beyond_visible_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "3")
    with pytest.raises(ValueError, match="LOCAL_RANK=3 but only 2 CUDA device"):
        tdist.info()


def test_loader_reshuffles_with_persistent_workers():
    loader = tdist.loader(
        list(range(12)),  # type: ignore[arg-type]
        batch_size=4,
        num_workers=1,
        persistent_workers=True,
    )
    orders = [[int(i) for b in loader for i in b] for _ in range(3)]
    assert all(sorted(order) == list(range(12)) for order in orders)
    assert len({tuple(order) for order in orders}) == 3  # the sampler, in this process, moved on
    del loader  # shuts the persistent worker down
