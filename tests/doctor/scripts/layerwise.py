"""Layers trained one after the other, each by its own optimizer (greedy layer-wise training, as
pytorch/examples' forward-forward): the second optimizer's steps are steps too."""

import torch
from _common import steps_from_argv

layers = [torch.nn.Linear(64, 64) for _ in range(2)]
x = torch.randn(256, 64)
for layer in layers:
    opt = torch.optim.SGD(layer.parameters(), lr=0.01)
    for _ in range(steps_from_argv(30)):
        loss = layer(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    x = layer(x).detach()
