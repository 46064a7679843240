"""Trains a few steps, then raises (after the profiled window has started)."""

import torch
from _common import images, mlp, steps_from_argv
from torch import nn
from torch.utils.data import DataLoader

fail_at = steps_from_argv(default=6)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(DataLoader(images(), batch_size=8)):
    if i == fail_at:
        raise RuntimeError(f"boom at step {i}")
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
