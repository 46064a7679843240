"""Fixed twin: each worker takes every n-th row (get_worker_info)."""

import itertools

import torch
from _common import take
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class Rows(IterableDataset):
    def rows(self):
        g = torch.Generator().manual_seed(0)
        for _ in range(400):
            yield torch.randn(48, generator=g), torch.randint(0, 10, (), generator=g)

    def __iter__(self):
        info = get_worker_info()
        wid, n = (info.id, info.num_workers) if info else (0, 1)
        return itertools.islice(self.rows(), wid, None, n)


if __name__ == "__main__":
    model = nn.Linear(48, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Rows(), batch_size=8, num_workers=2)
    for x, y in take(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
