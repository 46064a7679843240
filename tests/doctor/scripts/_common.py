"""Shared pieces of the smell scripts: a tiny dataset and model, and a loop length from argv."""

import itertools
import sys
from collections.abc import Iterable, Iterator

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def steps_from_argv(default: int = 40) -> int:
    """`--iters N` from the command line (the scripts are run by the doctor with their own args)."""
    return int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else default


def images(n: int = 256) -> TensorDataset:
    """Random 3x16x16 images with 10 classes."""
    g = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(n, 3, 16, 16, generator=g), torch.randint(0, 10, (n,), generator=g)
    )


def mlp() -> nn.Module:
    """A small classifier over flattened images."""
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 32), nn.ReLU(), nn.Linear(32, 10))


def take(batches: Iterable) -> Iterator:
    """The first `--iters` batches (default 40)."""
    return itertools.islice(batches, steps_from_argv())


def sgd_steps() -> Iterator[int]:
    """Train mlp() on images() with SGD for `--iters` batches; yield each step's index once its
    optimizer step is done (the robustness scripts act on the script's side between steps)."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i, (x, y) in enumerate(take(DataLoader(images(), batch_size=8))):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        yield i
