"""A training loop that updates a running-mean metric module (no parameters, as torchmetrics'
MeanMetric) with the loss itself, not its .detach(): no model forward records a wasted graph."""

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader


class Mean(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(()))

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        self.total += value.detach()
        return value * 1.0  # recorded: the loss requires grad


model, mean = mlp(), Mean()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8)):
    loss = nn.functional.cross_entropy(model(x), y)
    mean(loss)
    opt.zero_grad()
    loss.backward()
    opt.step()
