"""Deletes its own working directory during training (a cleanup step gone wrong)."""

import os
import shutil

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
    if i == 1:
        shutil.rmtree(os.getcwd())
