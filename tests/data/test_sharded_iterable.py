"""ShardedIterableDataset: each row exactly once across workers x ranks; even counts for DDP."""

from __future__ import annotations

import collections
import random
import types
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from torchpace.data import ShardedIterableDataset, fast_loader, set_epoch
from torchpace.data import sharding as sharding_module


class Shuffled:
    """A re-iterable source whose order depends on the epoch (as a shard shuffler's would)."""

    def __init__(self, n):
        self.n, self.epoch = n, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        return iter(random.Random(self.epoch).sample(range(self.n), self.n))


def _simulate(monkeypatch, n, replicas, workers, even, epoch=0):
    """Every (rank, worker) slot's rows, iterating in-process with a faked worker info."""
    out = {}
    for rank in range(replicas):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dataset = ShardedIterableDataset(
                Shuffled(n), num_replicas=replicas, rank=rank, even=even, length=n
            )
        dataset.set_epoch(epoch)
        for worker in range(max(workers, 1)):
            info = None if workers == 0 else types.SimpleNamespace(id=worker, num_workers=workers)
            monkeypatch.setattr(sharding_module, "get_worker_info", lambda info=info: info)
            out[rank, worker] = list(dataset)
    return out


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 120),
    replicas=st.integers(1, 4),
    workers=st.integers(0, 4),
    even=st.sampled_from([None, "drop", "pad"]),
    epoch=st.integers(0, 3),
)
def test_exactly_once_and_even_counts(n, replicas, workers, even, epoch):
    with pytest.MonkeyPatch.context() as monkeypatch:
        slots = _simulate(monkeypatch, n, replicas, workers, even, epoch)
    rows = collections.Counter(row for part in slots.values() for row in part)
    per_slot = {len(part) for part in slots.values()}
    total = replicas * max(workers, 1)
    if even is None:
        assert rows == collections.Counter(range(n))  # 0 lost, 0 repeated
        assert max(per_slot) - min(per_slot) <= 1
    elif even == "drop":
        assert set(rows.values()) <= {1} and sum(rows.values()) == n // total * total
        assert len(per_slot) == 1
    else:
        assert set(rows) == set(range(n)) and sum(rows.values()) == -(-n // total) * total
        assert len(per_slot) == 1


def test_len_matches_rows_of_this_rank():
    for rank in range(3):
        dataset = ShardedIterableDataset(range(10), num_replicas=3, rank=rank, even="drop")
        assert len(dataset) == len(list(dataset)) == 3
    counted = ShardedIterableDataset(iter_rows(7), num_replicas=2, rank=1, even="pad")
    assert len(counted) == len(list(counted)) == 4  # no __len__: counted with one pass


class iter_rows:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


class EpochSource:
    """A re-iterable source that shuffles by epoch and reports the epoch it saw."""

    def __init__(self, n):
        self.n, self.epoch = n, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        rows = list(range(self.n))
        rows = rows[self.epoch :] + rows[: self.epoch]
        return iter([(row, self.epoch) for row in rows])


def test_real_workers_two_ranks_each_row_once_per_epoch():
    loaders = [
        fast_loader(
            ShardedIterableDataset(EpochSource(23), num_replicas=2, rank=rank, even="pad"),
            batch_size=2,
            num_workers=2,
        )
        for rank in range(2)
    ]
    for epoch in range(2):
        seen, batches = collections.Counter(), []
        for loader in loaders:
            set_epoch(loader, epoch)
            rows = [
                (r, e)
                for rows, epochs in loader
                for r, e in zip(rows.tolist(), epochs.tolist(), strict=True)
            ]
            batches.append(len(rows))
            seen.update(r for r, e in rows if e == epoch)
        assert set(seen) == set(range(23)) and sum(seen.values()) == 24  # one pad row
        assert batches[0] == batches[1]
    del loaders


def test_plain_iterable_repeats_rows_per_worker_but_sharded_does_not():
    stock = DataLoader(iter_rows_dataset(), batch_size=None, num_workers=2)
    assert sorted(stock) == sorted(list(range(6)) * 2)
    sharded = DataLoader(ShardedIterableDataset(range(6)), batch_size=None, num_workers=2)
    assert sorted(sharded) == list(range(6))


def iter_rows_dataset():
    from torch.utils.data import IterableDataset

    class Rows(IterableDataset):
        def __iter__(self):
            return iter(range(6))

    return Rows()


def test_warns_when_ddp_could_hang():
    with pytest.warns(UserWarning, match="pass even='drop' or even='pad'"):
        ShardedIterableDataset(range(4), num_replicas=2, rank=0)


@pytest.mark.parametrize(("even", "length"), [("drop", 12), ("pad", 12), ("pad", 8)])
def test_a_wrong_row_count_fails_instead_of_hanging_ddp(even, length):
    dataset = ShardedIterableDataset(range(10), num_replicas=2, rank=0, even=even, length=length)
    with pytest.raises(ValueError, match=r"the source yielded (only 10 rows, not|more than) the"):
        list(dataset)


def test_transform_applies_after_sharding():
    dataset = ShardedIterableDataset(range(6), num_replicas=2, rank=1, even="drop", transform=str)
    assert list(dataset) == ["1", "3", "5"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="even must be None, 'drop' or 'pad', got 'trim'"):
        ShardedIterableDataset(range(3), even="trim")
    with pytest.raises(ValueError, match=r"rank must be in \[0, num_replicas=2\), got 2"):
        ShardedIterableDataset(range(3), num_replicas=2, rank=2, even="drop")
    with pytest.raises(ValueError, match="length must be >= 0, got -1"):
        ShardedIterableDataset(range(3), length=-1)


@pytest.mark.parametrize("source", [(i for i in range(6)), iter(range(6)), map(str, range(6))])
def test_a_one_shot_source_is_refused_not_left_empty_next_epoch(source):
    with pytest.raises(TypeError) as raised:
        ShardedIterableDataset(source)
    assert str(raised.value).startswith(
        f"ShardedIterableDataset needs a source that iter() restarts each epoch, got a "
        f"{type(source).__name__}, which can be iterated only once (the next epoch would be empty)"
    )
