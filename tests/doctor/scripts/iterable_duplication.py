"""Smell: an IterableDataset read by two workers that does not shard, so every row comes twice."""

import torch
from _common import take
from torch import nn
from torch.utils.data import DataLoader, IterableDataset


class Rows(IterableDataset):
    def __iter__(self):
        g = torch.Generator().manual_seed(0)
        for _ in range(400):
            yield torch.randn(48, generator=g), torch.randint(0, 10, (), generator=g)


if __name__ == "__main__":
    model = nn.Linear(48, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Rows(), batch_size=8, num_workers=2)
    for x, y in take(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
