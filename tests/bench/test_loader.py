"""The bench's loaders: a forked worker never frees what the parent left for its own collector."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from torchpace.bench.config import RunConfig
from torchpace.bench.loader import make_loader
from torchpace.bench.workloads.base import Workload


class _Collecting(Dataset[torch.Tensor]):
    """Items that run the worker's garbage collector, as a worker's allocations do now and then."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        gc.collect()
        return torch.zeros(2)


class _Cycle:
    """Parent garbage in a cycle (a model's, a batch's, a prefetcher's): says where it was freed.
    On a GPU it holds CUDA tensors, whose destructor kills a forked worker."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.me = folder, self

    def __del__(self) -> None:
        (self.folder / str(os.getpid())).touch()


def test_the_parents_garbage_is_not_freed_in_a_worker(tmp_path: Path) -> None:
    workload = Workload("collecting", torch.nn.Identity, _Collecting(), F.mse_loss, batch_size=2)
    loader = make_loader(workload, RunConfig(num_workers=2), seed=0)
    gc.disable()  # the cycle must still be uncollected when the workers fork
    try:
        _Cycle(tmp_path)
        assert len(list(loader)) == 4
    finally:
        gc.enable()
    gc.collect()
    assert [p.name for p in tmp_path.iterdir()] == [str(os.getpid())]
