"""A GAN-style loop: two optimizers step once each per iteration."""

import torch
from _common import steps_from_argv
from torch import nn

gen, disc = nn.Linear(8, 16), nn.Linear(16, 1)
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
for _ in range(steps_from_argv()):
    real, z = torch.randn(32, 16), torch.randn(32, 8)
    d_loss = disc(gen(z).detach()).mean() - disc(real).mean()
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = -disc(gen(z)).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
