"""Train and eval DataLoaders made at one line by a helper (as timm's create_loader does), both
reading a live replay buffer from a worker process: one cause, one finding."""

import collections

import torch
from _common import mlp, take
from torch import nn
from torch.utils.data import DataLoader, IterableDataset


class Replay(IterableDataset):
    def __init__(self) -> None:
        self.buffer = collections.deque(
            (torch.randn(3, 16, 16), i % 10) for i in range(512)
        )  # filled by the actors as training goes

    def __iter__(self):
        return iter(list(self.buffer))


def create_loader(data, batch_size: int) -> DataLoader:
    return DataLoader(data, batch_size=batch_size, num_workers=1)


train, evaluation = create_loader(Replay(), 8), create_loader(Replay(), 8)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(take(train)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i == 1:  # a short evaluation early on: both loaders have run
        with torch.no_grad():
            for x, _ in take(evaluation):
                model(x)
                break
