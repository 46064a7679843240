"""A script that runs its own torch.profiler with a schedule and exports its trace."""

import sys

import torch
from _common import images, mlp, take
from torch import nn
from torch.profiler import profile, schedule
from torch.utils.data import DataLoader

out = sys.argv[sys.argv.index("--trace") + 1]
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
sched = schedule(wait=1, warmup=1, active=3, repeat=1)
with profile(schedule=sched, on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
    for x, y in take(DataLoader(images(), batch_size=8)):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()
print("own profiler finished")
