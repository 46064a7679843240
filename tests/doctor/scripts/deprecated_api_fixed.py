"""Fixed twin: torch.amp.autocast(device_type), torch.amp.GradScaler and no TorchScript."""

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader


def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 1.0


model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cuda", enabled=False)
for x, y in take(DataLoader(images(), batch_size=8)):
    with torch.amp.autocast("cpu", enabled=False):
        loss = nn.functional.cross_entropy(scale(model(x)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
