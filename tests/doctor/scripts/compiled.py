"""A model under torch.compile (eager backend, so no compiler is needed) and bf16 CPU autocast."""

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

model = mlp()
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8)):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
