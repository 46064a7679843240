"""Trains, and gets SIGINT (as if the user pressed Ctrl-C) in its third profiled step.

The interrupt is timed by the profiler being on, not by a step number: which step the window
starts at depends on how the doctor found the steps, and a fixed step number landed after the
window on a loaded machine (the window and the timed steps were over, and the run ended cleanly).
"""

import os
import signal

import torch
from _common import images, mlp
from torch import nn
from torch.utils.data import DataLoader

model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
profiled = 0
for x, y in DataLoader(images(), batch_size=8):
    if torch.autograd._profiler_enabled():
        profiled += 1
        if profiled == 3:
            os.kill(os.getpid(), signal.SIGINT)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
