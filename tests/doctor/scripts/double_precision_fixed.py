"""Fixed twin: float32 model and data."""

import numpy as np
import torch
from _common import take
from torch import nn

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
rng = np.random.default_rng(0)
batches = ((torch.from_numpy(rng.standard_normal((16, 32))).float(), None) for _ in iter(int, 1))
for x, _ in take(batches):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
