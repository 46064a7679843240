"""Smell: pin_memory=True on a machine with no accelerator (a copy per batch for nothing)."""

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

loader = DataLoader(images(), batch_size=8, pin_memory=True)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(loader):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
