"""A thread takes batches from a DataLoader into a queue; the main thread trains on them.

The prefetch thread's batches come first, the main thread's optimizer steps are the steps."""

import queue
import threading

import torch
from _common import images, mlp, steps_from_argv
from torch import nn
from torch.utils.data import DataLoader

batches: queue.Queue = queue.Queue(maxsize=4)


def prefetch() -> None:
    for _ in range(steps_from_argv(40)):
        for batch in DataLoader(images(64), batch_size=8):
            batches.put(batch)
    batches.put(None)


threading.Thread(target=prefetch, name="prefetch", daemon=True).start()
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while (batch := batches.get()) is not None:
    x, y = batch
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained")
