"""Smell: more torch threads than the cores this process may use."""

import os

import torch
from _common import images, mlp, steps_from_argv
from torch import nn
from torch.utils.data import DataLoader

torch.set_num_threads(2 * len(os.sched_getaffinity(0)) + 1)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in zip(range(steps_from_argv()), DataLoader(images(), batch_size=8)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
