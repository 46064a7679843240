"""Two epochs of 4 batches from 2 workers, started again for each epoch."""

import torch
from _common import images, mlp
from torch import nn
from torch.utils.data import DataLoader

loader = DataLoader(images(32), batch_size=8, num_workers=2)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _epoch in range(2):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
