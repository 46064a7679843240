"""Smell: every 10th step a blocking log call (a sleep here) stalls the loop, with no evaluation,
checkpoint or loader start to explain it: --follow captures one under the profiler."""

import time

import torch
from _common import images, mlp
from torch import nn
from torch.utils.data import DataLoader

model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(DataLoader(images(480), batch_size=8)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 9:
        time.sleep(1.0)  # a slow logger: the loop waits for it
