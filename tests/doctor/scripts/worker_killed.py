"""A DataLoader worker is killed (the OOM killer) just as the third batch is made."""

import os
import signal

import torch
from _common import mlp, take
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Dies(Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        if i == 40:  # batch 6 (batch size 8): workers prefetch it as profiling starts
            os.kill(os.getpid(), signal.SIGKILL)
        return torch.randn(3, 16, 16), i % 10


model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(Dies(), batch_size=8, num_workers=2)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
