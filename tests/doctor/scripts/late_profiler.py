"""Starts its own torch.profiler in the middle of training, while the doctor is profiling."""

import sys

import torch
from _common import images, mlp
from torch import nn
from torch.profiler import profile
from torch.utils.data import DataLoader

out = sys.argv[sys.argv.index("--trace") + 1]
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
prof = None
for i, (x, y) in enumerate(DataLoader(images(), batch_size=8)):
    if i == 5:
        prof = profile()
        prof.start()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i == 8:
        prof.stop()
        prof.export_chrome_trace(out)
        break
print("late profiler finished")
