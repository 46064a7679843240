"""A stall of cheap samples that compute (decode and normalise in Python): workers take cores."""

import torch
from _common import mlp, take
from torch import nn
from torch.utils.data import DataLoader, Dataset


class ComputingDataset(Dataset):
    def __init__(self) -> None:
        self.raw = torch.randint(0, 256, (1024, 16, 16, 3), dtype=torch.uint8)

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i: int):
        x = self.raw[i].permute(2, 0, 1).float().div(255.0)
        for _ in range(20):  # augmentation-like arithmetic: the thread is busy, not waiting
            x = (x - x.mean()) / (x.std() + 1e-6)
        return x, i % 10


loader = DataLoader(ComputingDataset(), batch_size=32)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(loader):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
