"""Changes its working directory during training (to where it keeps checkpoints)."""

import os
import sys

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

target = sys.argv[sys.argv.index("--chdir") + 1]
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(take(DataLoader(images(), batch_size=8))):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i == 1:
        os.chdir(target)
