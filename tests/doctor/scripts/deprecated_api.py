"""Smell: the deprecated torch.cuda.amp.autocast and GradScaler (and torch.jit.script)."""

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader


def scaled(x: torch.Tensor) -> torch.Tensor:
    return x * 1.0


scale = torch.jit.script(scaled)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.cuda.amp.GradScaler(enabled=False)  # nanoGPT's train.py:196
for x, y in take(DataLoader(images(), batch_size=8)):
    with torch.cuda.amp.autocast(enabled=False):
        loss = nn.functional.cross_entropy(scale(model(x)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
