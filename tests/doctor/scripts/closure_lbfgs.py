"""LBFGS: forward and backward run inside optimizer.step(closure)."""

import torch
from _common import steps_from_argv
from torch import nn

model = nn.Linear(16, 1)
opt = torch.optim.LBFGS(model.parameters(), max_iter=3)
x, y = torch.randn(64, 16), torch.randn(64, 1)


def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for _ in range(steps_from_argv()):
    opt.step(closure)
