"""Fixed twin: pin memory only when there is an accelerator."""

import torch
from _common import images, mlp, steps_from_argv
from torch import nn
from torch.utils.data import DataLoader

loader = DataLoader(images(), batch_size=8, pin_memory=torch.cuda.is_available())
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in zip(range(steps_from_argv()), loader):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
