"""Train and eval DataLoaders made at one line by a helper (as timm's create_loader does), both
pinning memory with no accelerator: one cause, one finding."""

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader


def create_loader(data, batch_size: int) -> DataLoader:
    return DataLoader(data, batch_size=batch_size, pin_memory=True)


train, evaluation = create_loader(images(), 8), create_loader(images(64), 8)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(train):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
