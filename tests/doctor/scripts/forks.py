"""Forks during training: the child trains a few steps on its own, then ends; the parent waits."""

import os

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

torch.set_num_threads(1)  # OpenMP thread pools do not survive a fork
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
child = False
for i, (x, y) in enumerate(take(DataLoader(images(), batch_size=8))):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i == 2:
        pid = os.fork()
        if pid == 0:
            child = True
        else:
            os.waitpid(pid, 0)
    if child and i == 12:
        break
print("child done" if child else "parent done")
