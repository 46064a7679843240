"""Smell: every 10th step a blocking log call (a sleep here) stalls the loop, with no evaluation,
checkpoint or loader start to explain it: --follow captures one under the profiler."""

import time

import torch
from _common import images, mlp
from torch import nn
from torch.utils.data import DataLoader

# One thread: beside a busy machine 2 torch threads wait for each other at every op, and this
# loop's 1 ms steps took 460 ms (make test at load 22), too close to its 1 s stalls to tell apart.
torch.set_num_threads(1)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(DataLoader(images(480), batch_size=8)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 9:
        time.sleep(1.0)  # a slow logger: the loop waits for it
