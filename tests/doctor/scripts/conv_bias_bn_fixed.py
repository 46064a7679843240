"""Fixed twin: the convolution before BatchNorm has no bias."""

import torch
from _common import images, take
from torch import nn
from torch.utils.data import DataLoader

model = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1, bias=False),
    nn.BatchNorm2d(8),
    nn.ReLU(),
    nn.Flatten(),
    nn.Linear(8 * 256, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(images(), batch_size=8)
for x, y in take(loader):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
