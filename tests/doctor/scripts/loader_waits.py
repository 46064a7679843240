"""A stall that workers fix: every sample waits 2 ms (a slow disk or a remote store), no CPU: 64 ms
a step against a few ms of math, a stall even when a busy machine stretches the math 10x."""

import time

import torch
from _common import mlp, take
from torch import nn
from torch.utils.data import DataLoader, Dataset


class WaitingDataset(Dataset):
    def __len__(self) -> int:
        return 1024

    def __getitem__(self, i: int):
        time.sleep(0.002)  # I/O: the thread sleeps, the core is free
        return torch.full((3, 16, 16), float(i % 7)), i % 10


loader = DataLoader(WaitingDataset(), batch_size=32)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(loader):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
