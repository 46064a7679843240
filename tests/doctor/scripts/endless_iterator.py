"""An endless sampler's iterator kept in a global, with worker processes (minGPT's and makemore's
trainers): the doctor stops the script mid-epoch, and the iterator outlives it in the namespace.

Its worker processes are published in _common.WORKERS for the test to read their exit codes."""

import _common
import torch
from _common import images, mlp
from torch import nn
from torch.utils.data import DataLoader, RandomSampler

data = images(64)
endless = RandomSampler(data, replacement=True, num_samples=10**10)
batches = iter(DataLoader(data, sampler=endless, batch_size=8, num_workers=2))
_common.WORKERS = list(batches._workers)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(_common.steps_from_argv(100)):
    x, y = next(batches)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
