"""A user workload for `torchpace bench`: a small MLP regressing a noisy function of tabular features.

    torchpace bench --workload examples/bench_workload.py --steps 20

The bench imports this file and calls build(). It returns the model, a map-style dataset whose items
are (input, target) pairs, and the loss, called as loss(model(inputs), targets). Optional keys:
collate (the DataLoader's collate_fn), batch_size (default 32), lengths (one int per sample, for
variable-length data: turns on the bucketing techniques), optimizer (params -> Optimizer; default
SGD with momentum) and name. Define classes at module level so DataLoader workers can pickle them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset


class Features(Dataset):
    """Random features with a smooth target; a little host-side work per item, like real parsing."""

    def __init__(self, n: int = 4096, dim: int = 64, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, dim, generator=g)
        self.w = torch.randn(dim, generator=g) / dim**0.5

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.x[index]
        # Standardise per sample on the host, as a feature pipeline would.
        x = (x - x.mean()) / (x.std() + 1e-6)
        return x, torch.sin(x @ self.w).unsqueeze(0)


class MLP(nn.Module):
    """Residual MLP blocks (repeated blocks, so activation checkpointing applies)."""

    def __init__(self, dim: int = 64, hidden: int = 256, depth: int = 3) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(Block(dim, hidden) for _ in range(depth)))
        self.head = nn.Linear(dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


class Block(nn.Module):
    """LayerNorm -> Linear -> GELU -> Linear, with a residual connection."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


def build() -> dict[str, object]:
    """What the bench trains."""
    torch.manual_seed(0)
    return {
        "name": "tabular-mlp",
        "model": MLP(),
        "dataset": Features(),
        "loss": F.mse_loss,
        "batch_size": 128,
    }
