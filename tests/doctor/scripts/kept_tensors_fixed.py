"""Fixed: keep the value, not the tensor."""

import torch
from _common import steps_from_argv
from torch import nn

model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = []
for _ in range(steps_from_argv(12)):
    x = torch.randn(2048, 256)
    out = model(x)
    loss = out.square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    history.append(loss.item())
