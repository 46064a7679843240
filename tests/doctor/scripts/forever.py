"""A training loop that never ends on its own."""

import torch
from torch import nn

model = nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
while True:
    loss = model(torch.randn(16, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
