"""DevicePrefetcher: CPU pass-through semantics, error propagation, and stream ordering (faked)."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import warnings
from collections import namedtuple

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from torchpace.data import DevicePrefetcher, streams
from torchpace.data._tree import iter_tensors, map_tensors

Pair = namedtuple("Pair", ["x", "y"])


@dataclasses.dataclass(frozen=True)
class Sample:
    image: torch.Tensor
    label: int
    extra: dict = dataclasses.field(default_factory=dict)


def _nested(i: int):
    return {
        "pair": Pair(torch.full((2,), i), [torch.tensor(i), "text"]),
        "sample": Sample(torch.ones(3) * i, i, {"m": torch.zeros(1)}),
        "meta": (i, None),
    }


def test_cpu_passes_batches_through_unchanged():
    batches = [_nested(i) for i in range(3)]
    out = list(DevicePrefetcher(batches, "cpu"))
    assert len(out) == 3
    for got, want in zip(out, batches, strict=True):
        assert got is want


def test_transform_runs_on_cpu_too():
    loader = [torch.arange(4, dtype=torch.uint8)]
    (out,) = DevicePrefetcher(loader, "cpu", transform=lambda t: t.float() / 255)
    assert out.dtype == torch.float32 and out[1].item() == pytest.approx(1 / 255)


def test_passes_through_loader_attributes():
    loader = DataLoader(TensorDataset(torch.arange(10)), batch_size=3)
    prefetcher = DevicePrefetcher(loader, "cpu")
    assert len(prefetcher) == 4
    assert prefetcher.dataset is loader.dataset
    assert prefetcher.sampler is loader.sampler
    assert prefetcher.batch_sampler is loader.batch_sampler


def test_empty_loader_yields_nothing():
    assert list(DevicePrefetcher([], "cpu")) == []
    empty = DataLoader(TensorDataset(torch.arange(0)), batch_size=2)
    assert list(DevicePrefetcher(empty, "cpu")) == []


def _failing(at: int):
    for i in range(at):
        yield torch.tensor(i)
    raise KeyError(f"bad record {at}")


def test_loader_error_is_reraised_at_the_next_with_its_batch_index():
    iterator = iter(DevicePrefetcher(_failing(3), "cpu"))
    assert [next(iterator).item() for _ in range(3)] == [0, 1, 2]  # every good batch first
    with pytest.raises(KeyError, match="bad record 3") as raised:
        next(iterator)
    assert any("produced batch 3" in note for note in raised.value.__notes__)
    with pytest.raises(StopIteration):
        next(iterator)


def test_transform_error_is_reraised_with_its_batch_index():
    def transform(batch):
        if batch.item() == 1:
            raise ValueError("cannot normalise")
        return batch

    iterator = iter(
        DevicePrefetcher([torch.tensor(0), torch.tensor(1)], "cpu", transform=transform)
    )
    assert next(iterator).item() == 0
    with pytest.raises(ValueError, match="cannot normalise") as raised:
        next(iterator)
    assert "produced batch 1" in raised.value.__notes__[0]


def test_dataloader_worker_error_surfaces_through_the_prefetcher():
    class Broken(TensorDataset):
        def __getitem__(self, index):
            if index == 5:
                raise RuntimeError("decode failed")
            return super().__getitem__(index)

    loader = DataLoader(Broken(torch.arange(8)), batch_size=2, num_workers=1)
    got = []
    with pytest.raises(RuntimeError, match="decode failed") as raised:
        for (batch,) in DevicePrefetcher(loader, "cpu"):
            got.append(batch.tolist())
    assert got == [[0, 1], [2, 3]]
    assert "produced batch 2" in raised.value.__notes__[-1]


def test_reiterates_epochs_and_survives_break():
    loader = DataLoader(TensorDataset(torch.arange(6)), batch_size=2, num_workers=1)
    prefetcher = DevicePrefetcher(loader, "cpu")
    for _ in prefetcher:
        break
    first = [b.tolist() for (b,) in prefetcher]
    second = [b.tolist() for (b,) in prefetcher]
    assert first == second == [[0, 1], [2, 3], [4, 5]]


def test_cuda_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"device='cuda' but torch.cuda.is_available\(\) is False"):
        DevicePrefetcher([], "cuda")


def test_tree_walk_keeps_containers():
    batch = _nested(2)
    out = map_tensors(batch, lambda t: t + 1)
    assert isinstance(out["pair"], Pair) and out["pair"].x.tolist() == [3, 3]
    assert out["pair"].y[1] == "text" and out["meta"] == (2, None)
    assert isinstance(out["sample"], Sample) and out["sample"].label == 2
    assert out["sample"].extra["m"].item() == 1
    assert batch["sample"].image.tolist() == [2.0, 2.0, 2.0]  # the input is not modified
    assert len(list(iter_tensors(batch))) == 4


class RecordingStreams:
    """StreamOps that log the order of stream operations instead of running them."""

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.created = 0
        self.consumer = "main"

    def current_stream(self):
        return self.consumer

    def new_stream(self):
        self.created += 1
        return f"side{self.created}"

    @contextlib.contextmanager
    def use(self, stream):
        self.log.append(("enter", stream))
        yield
        self.log.append(("exit", stream))

    def wait_stream(self, waiter, waited):
        self.log.append(("wait", waiter, waited))

    def record_stream(self, tensor, stream):
        self.log.append(("record", int(tensor.flatten()[0]), stream))


# The recording fakes run the stream path on CPU tensors, which are never pinned.
unpinned_ok = pytest.mark.filterwarnings("ignore:DevicePrefetcher. the loader's batches are not")


@pytest.fixture
def recording(monkeypatch):
    ops = RecordingStreams()
    monkeypatch.setattr(streams, "stream_ops_for", lambda device: ops)
    return ops


@unpinned_ok
def test_stream_ordering_per_batch(recording):
    loader = [{"x": torch.tensor([i]), "y": [torch.tensor([10 + i])]} for i in range(2)]
    prefetcher = DevicePrefetcher(loader, "cpu")
    iterator = iter(prefetcher)
    # Batch 0 is enqueued at iter(): side waits on the consumer, then the copy runs on side.
    assert recording.log == [("wait", "side1", "main"), ("enter", "side1"), ("exit", "side1")]
    recording.log.clear()
    recording.consumer = "other"  # the consumer may switch streams; hand-off follows it
    next(iterator)
    assert recording.log[:3] == [
        ("wait", "other", "side1"),
        ("record", 0, "other"),
        ("record", 10, "other"),
    ]
    assert recording.log[3:] == [("wait", "side1", "other"), ("enter", "side1"), ("exit", "side1")]


@unpinned_ok
def test_one_side_stream_for_all_epochs(recording):
    prefetcher = DevicePrefetcher([torch.tensor([1])], "cpu")
    for _ in range(5):
        assert len(list(prefetcher)) == 1
    assert recording.created == 1


@unpinned_ok
def test_transform_runs_inside_the_side_stream(recording):
    def transform(batch):
        recording.log.append(("transform",))
        return batch

    list(DevicePrefetcher([torch.tensor([1])], "cpu", transform=transform))
    assert recording.log[:4] == [
        ("wait", "side1", "main"),
        ("enter", "side1"),
        ("transform",),
        ("exit", "side1"),
    ]


def _live_tensors() -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if issubclass(type(obj), torch.Tensor))


@unpinned_ok
def test_no_batches_kept_alive_across_epochs(recording):
    loader = DataLoader(TensorDataset(torch.randn(40, 8)), batch_size=4)
    prefetcher = DevicePrefetcher(loader, "cpu")
    counts = []
    for _ in range(4):
        for _batch in prefetcher:
            pass
        del _batch
        counts.append(_live_tensors())
    assert len(set(counts[1:])) == 1, counts
    assert recording.created == 1


def test_warns_once_when_batches_are_not_pinned(recording):
    prefetcher = DevicePrefetcher([torch.ones(2), torch.ones(2)], "cpu")
    with pytest.warns(UserWarning, match="not in pinned memory, so their copies cannot overlap"):
        assert len(list(prefetcher)) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(prefetcher)  # once per prefetcher, not per epoch
