"""Training that logs through a library which calls a module's forward() itself."""

import loglib
import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    loglib.log(loss.detach())
