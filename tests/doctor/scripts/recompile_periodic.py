"""Smell: a compiled model whose batch size changes every 10 steps (the last batch of a bucket,
a new bucket): with dynamic shapes off each new size fails dynamo's guard on the input's size and
the model compiles again, so every 10th step is slow. `--backend NAME` (default eager)."""

import sys

import torch
import torch._dynamo
from _common import steps_from_argv
from torch import nn

BACKEND = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else "eager"
torch._dynamo.config.automatic_dynamic_shapes = False  # every new size compiles again
torch._dynamo.config.recompile_limit = 64

# 24 layers: dynamo traces each one, so a compile takes far longer than a step, however loaded
# the machine is
model = nn.Sequential(
    nn.Flatten(),
    nn.Linear(3 * 16 * 16, 64),
    *(nn.Linear(64, 64) for _ in range(24)),
    nn.Linear(64, 10),
)
compiled = torch.compile(model, backend=BACKEND)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
g = torch.Generator().manual_seed(0)
for step in range(steps_from_argv(70)):
    batch = 8 + step // 10  # a new size every 10 steps
    x, y = torch.randn(batch, 3, 16, 16, generator=g), torch.randint(0, 10, (batch,), generator=g)
    loss = nn.functional.cross_entropy(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
