"""Smell (GPU): activations that do not fit the share of the GPU the process allows itself."""

import torch
from _common import steps_from_argv
from torch import nn

torch.cuda.set_per_process_memory_fraction(0.05)  # ~4 GiB of an 80 GiB GPU: fails fast
model = nn.Sequential(*[nn.Sequential(nn.Linear(4096, 4096), nn.GELU()) for _ in range(8)]).cuda()
opt = torch.optim.AdamW(model.parameters())
for _ in range(steps_from_argv(8)):
    x = torch.randn(32768, 4096, device="cuda")  # 512 MiB a layer's output
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
