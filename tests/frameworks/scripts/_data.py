"""Shared pieces of the framework scripts: a small classification set and model."""

import torch
from torch import nn
from torch.utils.data import TensorDataset


def dataset(n: int = 256) -> TensorDataset:
    """Random 32-feature rows with 4 classes."""
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 32, generator=g), torch.randint(0, 4, (n,), generator=g))


def model() -> nn.Module:
    """A small classifier."""
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
