"""Smell: the model and data in float64 (numpy data, model.double())."""

import numpy as np
import torch
from _common import take
from torch import nn

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).double()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
rng = np.random.default_rng(0)
batches = ((torch.from_numpy(rng.standard_normal((16, 32))), None) for _ in iter(int, 1))
for x, _ in take(batches):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
