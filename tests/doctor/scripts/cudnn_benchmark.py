"""Smell (GPU): a conv net with fixed input shapes and cudnn.benchmark off."""

import sys

import torch
from _common import images, take
from torch import nn
from torch.utils.data import DataLoader

torch.backends.cudnn.benchmark = "--fixed" in sys.argv
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                      nn.Flatten(), nn.Linear(16 * 256, 10)).cuda()  # fmt: skip
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8, drop_last=True, pin_memory=True)):
    loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    opt.zero_grad()
    loss.backward()
    opt.step()
