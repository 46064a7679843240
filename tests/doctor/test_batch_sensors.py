"""The loader sensor's batch measures: padding read from a batch, and the two-read sample probe."""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset

from torchpace.data import pad_collate
from torchpace.runner.sensors.padding import collate_pad_id, measure
from torchpace.runner.sensors.samples import probe

LENGTHS = (5, 20, 9, 13)


def _rows() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(1, 1000, (n,), generator=g) for n in LENGTHS]


def test_padding_from_an_attention_mask() -> None:
    ids = pad_sequence(_rows(), batch_first=True)
    found = measure({"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": ids})
    assert found is not None and found.source == "attention_mask"
    assert (found.width, found.lengths) == (20, LENGTHS)


def test_padding_from_lengths_beside_a_padded_tensor() -> None:
    # pack_padded_sequence's inputs, time-major: [T, B, features] and the B lengths.
    padded = pad_sequence([r.float()[:, None].expand(-1, 3) for r in _rows()])
    found = measure((padded, torch.tensor(LENGTHS), torch.tensor([0, 1, 0, 1])))
    assert found is not None and (found.source, found.width, found.lengths) == (
        "lengths",
        20,
        LENGTHS,
    )


@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_from_runs_of_a_pad_id(side: str) -> None:
    ids = pad_sequence(_rows(), batch_first=True, padding_value=7, padding_side=side)
    found = measure(ids)  # the id is inferred: it ends (starts) most rows, not the longest
    assert found is not None and (found.source, found.lengths) == ("pad id 7", LENGTHS)


def test_no_padding_read_where_there_is_none() -> None:
    g = torch.Generator().manual_seed(0)
    assert measure(torch.randint(0, 50_000, (16, 64), generator=g)) is None  # token windows
    one_hot = torch.nn.functional.one_hot(torch.randint(0, 10, (16,), generator=g), 10)
    assert measure(one_hot) is None  # zeros everywhere, not runs at the row ends
    assert measure(torch.randn(16, 64)) is None  # features, not ids
    assert measure(pad_sequence(_rows(), batch_first=True)[:1]) is None  # one row: no batch


def test_pad_id_is_read_from_the_collate_fn() -> None:
    assert collate_pad_id(functools.partial(pad_collate, pad_value=3)) == 3
    assert collate_pad_id(pad_collate) == 0  # its default
    assert collate_pad_id(functools.partial(pad_sequence, padding_value=-1)) == -1
    assert collate_pad_id(torch.utils.data.default_collate) is None


class Decoded(Dataset):
    """Deterministic 'decoding'; counts its reads and opens a handle lazily, as h5py users do."""

    def __init__(self, augment: str = "") -> None:
        self.augment, self.handle, self.reads = augment, None, 0

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.handle is None:
            self.handle = object()  # a file a worker must open for itself
        x = torch.full((3, 8, 8), float(i))
        if self.augment == "torch":
            x = x + torch.rand(())
        elif self.augment == "random":
            x = x + random.random()
        elif self.augment == "numpy":
            x = x + float(np.random.rand())
        return x


def test_probe_reads_twice_and_leaves_the_dataset_and_random_streams_alone() -> None:
    dataset = Decoded()
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    expected = (torch.rand(()), random.random(), np.random.rand())
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    found = probe(Decoded("torch"))  # draws from torch's generator...
    assert (torch.rand(()), random.random(), np.random.rand()) == expected  # ...put back after
    assert found is not None and found.draws_random
    clean = probe(dataset)
    assert clean is not None and clean.same is True and not clean.draws_random
    assert clean.sample_bytes == 3 * 8 * 8 * 4 and clean.dataset_len == 8 and clean.cpu_ms >= 0
    assert dataset.handle is None  # the lazy handle was opened on the probe's copy only


@pytest.mark.parametrize("augment", ["random", "numpy"])
def test_probe_sees_python_and_numpy_randomness(augment: str) -> None:
    found = probe(Decoded(augment))
    assert found is not None and found.draws_random and found.same is False


def test_probe_tells_a_decoding_read_from_a_read_of_memory() -> None:
    """A TensorDataset already is the cache (the sweep's was told to cache itself, 0.010 ms a
    read): its reads cost what the probe's in-memory twin costs; decoding costs many times that.
    CPU times, the same on a busy machine."""
    import zlib

    from torch.nn import functional as F
    from torch.utils.data import TensorDataset

    from torchpace.doctor.rules.repeated_decode import MIN_DECODE_RATIO

    class Compressed(Dataset):
        def __init__(self) -> None:
            self.blob = zlib.compress(bytes(range(256)) * 192)

        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> torch.Tensor:
            raw = np.frombuffer(zlib.decompress(self.blob), np.uint8).reshape(1, 3, 128, 128)
            return F.interpolate(torch.from_numpy(raw.copy()).float(), size=(32, 32))[0]

    memory = probe(TensorDataset(torch.rand(64, 3, 32, 32), torch.arange(64)))
    assert memory is not None and memory.same is True
    assert memory.cached_ms > 0 and memory.cpu_ms < MIN_DECODE_RATIO * memory.cached_ms
    decoding = probe(Compressed())
    assert decoding is not None and decoding.cpu_ms > MIN_DECODE_RATIO * decoding.cached_ms


class Graph:
    """A PyG `Data` in small: its tensors in a mapping it holds, a link back to itself."""

    def __init__(self, i: int) -> None:
        self._store = {"x": torch.full((5, 4), float(i)), "edge_index": torch.zeros(2, 8).long()}
        self._store["y"] = torch.tensor([i])
        self.me = self


class Graphs(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> Graph:
        return Graph(i)


def test_probe_compares_samples_that_keep_their_tensors_in_attributes() -> None:
    """PyG's IMDB-BINARY (gin.py): samples whose tensors sit in an object's attributes were
    "not comparable", and OneHotDegree, run again every epoch, went unseen."""
    found = probe(Graphs())
    assert found is not None and found.same is True
    assert found.sample_bytes == 5 * 4 * 4 + 2 * 8 * 8 + 8


def test_probe_of_an_unreadable_dataset_is_none() -> None:
    class Broken(Decoded):
        def __getitem__(self, i: int) -> torch.Tensor:
            raise OSError("no such file")

    assert probe(Broken()) is None
    assert probe([]) is None  # nothing to read


def test_wait_cpu_share_counts_n_waits_against_n_minus_1_gaps() -> None:
    from torchpace.runner.sensors.loader import LoaderRecord, loader_facts, static_facts

    loader = torch.utils.data.DataLoader(Decoded(), batch_size=2)
    record = LoaderRecord(static_facts(loader, None), batches_profiled=4)
    record.wait_s, record.wait_cpu_s, record.rest_s, record.rest_cpu_s = 2.0, 1.0, 6.0, 3.0
    facts = loader_facts(record, profiled_ms=8000.0)
    assert facts.wait_cpu_share == pytest.approx(0.25 / (0.25 + 1.0))  # 1 s / 4 and 3 s / 3
    assert facts.wait_ms_per_batch == pytest.approx(500.0)
    one = loader_facts(LoaderRecord(static_facts(loader, None), batches_profiled=1), 8000.0)
    assert one.wait_cpu_share is None  # no gap between batches measured


def _pyg_like(name: str, bases: tuple[type, ...], **attrs: object) -> type:
    """A class as PyG names its own (no torch_geometric here)."""
    return type(name, bases, {"__module__": f"torch_geometric.{name.lower()}", **attrs})


def test_a_pyg_in_memory_dataset_without_a_transform_is_named() -> None:
    """PyG's InMemoryDataset keeps each graph it built (`_data_list`) and copies it at a later
    read: without a per-read transform there is nothing to decode again."""
    from torch.utils.data import DataLoader

    from torchpace.runner.sensors.loader import static_facts

    in_memory = _pyg_like("InMemoryDataset", (Graphs,), transform=None)
    tu = _pyg_like("TUDataset", (in_memory,))
    transformed = _pyg_like("TUDataset", (in_memory,), transform=lambda g: g)
    on_disk = _pyg_like("QM9Disk", (Graphs,), transform=None)
    facts = [static_facts(DataLoader(cls()), None) for cls in (tu, transformed, on_disk, Graphs)]
    assert [f.pyg_in_memory for f in facts] == [True, False, False, False]
