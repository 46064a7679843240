"""Smell: a batch whose activations do not fit the memory the process may use (host OOM)."""

import torch
from _common import steps_from_argv
from _memory_cap import cap_address_space
from torch import nn

model = nn.Sequential(
    nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)
)
opt = torch.optim.Adam(model.parameters())
cap_address_space(400)
g = torch.Generator().manual_seed(0)
for _ in range(steps_from_argv(8)):
    x, y = torch.randn(16384, 512, generator=g), torch.randint(0, 10, (16384,), generator=g)
    loss = nn.functional.cross_entropy(model(x), y)  # 16384 x 2048 floats: 128 MiB a layer
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
