"""Calls the model as model.forward(x), which runs no nn.Module hooks."""

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

model = mlp().double()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8)):
    loss = nn.functional.cross_entropy(model.forward(x.double()), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
