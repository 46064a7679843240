"""Fixed twin: pin memory only when there is an accelerator."""

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

loader = DataLoader(images(), batch_size=8, pin_memory=torch.cuda.is_available())
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(loader):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
