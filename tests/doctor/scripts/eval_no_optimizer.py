"""Evaluation only: a DataLoader, no optimizer, no backward."""

import torch
from _common import images, mlp, take
from torch.utils.data import DataLoader

model = mlp().eval()
with torch.no_grad():
    for x, _y in take(DataLoader(images(), batch_size=8)):
        model(x)
