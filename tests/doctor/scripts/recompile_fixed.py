"""Fixed twin: the sequence dimension is marked dynamic, so one graph serves every length."""

import torch
from _common import TokenClassifier, steps_from_argv
from torch import nn

model = TokenClassifier()
compiled = torch.compile(model, backend="eager", dynamic=False)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
g = torch.Generator().manual_seed(0)
for step in range(steps_from_argv()):
    ids = torch.randint(1, 1000, (8, 8 + step), generator=g)
    mask = torch.ones_like(ids)
    labels = torch.randint(0, 2, (8,), generator=g)
    torch._dynamo.mark_dynamic(ids, 1)  # the fix: one graph for every sequence length
    torch._dynamo.mark_dynamic(mask, 1)
    loss = nn.functional.cross_entropy(compiled(ids, mask), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
