"""Small models for the train tests (a module name unique across tests/, for plain imports)."""

from __future__ import annotations

import torch
from torch import nn


class TinyNet(nn.Module):
    """Linear -> GELU -> Dropout -> Linear with a BatchNorm, so buffers and RNG matter."""

    def __init__(self, width: int = 16, dropout: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, width)
        self.norm = nn.BatchNorm1d(width)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(nn.functional.gelu(self.norm(self.fc1(x)))))


def cross_entropy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """loss_fn for TrainStep: mean cross-entropy."""
    return nn.functional.cross_entropy(model(x), y)
