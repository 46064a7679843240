"""Smell: a model compiled with dynamic=False fed batches whose sequence length changes.

Every new length fails the guard on the input's size, so dynamo compiles the model again, step
after step, until its recompile limit; past it the model runs uncompiled.
"""

import torch
from _common import TokenClassifier, steps_from_argv
from torch import nn

model = TokenClassifier()
compiled = torch.compile(model, backend="eager", dynamic=False)  # the smell, with varying lengths
opt = torch.optim.SGD(model.parameters(), lr=0.01)
g = torch.Generator().manual_seed(0)
for step in range(steps_from_argv()):
    ids = torch.randint(1, 1000, (8, 8 + step), generator=g)  # a longer batch every step
    mask = torch.ones_like(ids)
    labels = torch.randint(0, 2, (8,), generator=g)
    loss = nn.functional.cross_entropy(compiled(ids, mask), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
