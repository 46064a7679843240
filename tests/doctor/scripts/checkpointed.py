"""Training with activation checkpointing: backward runs the checkpointed blocks' forwards again
(as TRL's SFT and HF's gradient_checkpointing do). Not evaluation: no grad-in-eval."""

import sys

import torch
from _common import images, take
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64)) for _ in range(3)
        )
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)[:, :64]
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant="--reentrant" in sys.argv)
        return self.head(x)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
