"""Profiles itself as TensorBoard users do: tensorboard_trace_handler (torch 2.13 passes
use_python_export= to export_chrome_trace) and a repeating schedule; or, with --fixed, a handler
that exports every cycle to one fixed path."""

import sys

import torch
from _common import images, mlp, take
from torch import nn
from torch.profiler import profile, schedule, tensorboard_trace_handler
from torch.utils.data import DataLoader

out = sys.argv[sys.argv.index("--out") + 1]
if "--fixed" in sys.argv:

    def handler(p):
        p.export_chrome_trace(out + "/fixed.pt.trace.json")
else:
    handler = tensorboard_trace_handler(out)

model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
sched = schedule(wait=1, warmup=1, active=2, repeat=2)
with profile(schedule=sched, on_trace_ready=handler) as prof:
    for x, y in take(DataLoader(images(), batch_size=8)):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()
print("profiled itself")
