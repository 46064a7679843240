"""A stall that workers fix: every sample waits 0.5 ms (a slow disk or a remote store), no CPU."""

import time

import torch
from _common import mlp, take
from torch import nn
from torch.utils.data import DataLoader, Dataset


class WaitingDataset(Dataset):
    def __len__(self) -> int:
        return 1024

    def __getitem__(self, i: int):
        time.sleep(0.0005)  # I/O: the thread sleeps, the core is free
        return torch.full((3, 16, 16), float(i % 7)), i % 10


loader = DataLoader(WaitingDataset(), batch_size=32)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(loader):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
