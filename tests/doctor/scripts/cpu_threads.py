"""Smell: more torch threads than the cores this process may use."""

import os

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

torch.set_num_threads(2 * len(os.sched_getaffinity(0)) + 1)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
