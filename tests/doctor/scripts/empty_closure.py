"""Manual optimization as Lightning runs it: forward and backward in the training step, then
optimizer.step(closure) with a closure that does nothing."""

import torch
from _common import steps_from_argv
from torch import nn

model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU())
opt = torch.optim.Adam(model.parameters())
x = torch.randn(256, 256)

for _ in range(steps_from_argv()):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step(lambda: None)
