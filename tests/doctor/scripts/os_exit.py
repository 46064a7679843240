"""Ends with os._exit(3) in the middle of training (no cleanup, no atexit)."""

import os

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(take(DataLoader(images(), batch_size=8))):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i == 6:
        os._exit(3)
