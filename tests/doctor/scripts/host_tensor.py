"""Smell: a small tensor built on the host and copied to the device every step.

On a machine without a GPU the copy goes to the "meta" device, so the host-to-device copy exists
and the doctor can see it; the training itself stays on the CPU.
"""

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

device = "cuda" if torch.cuda.is_available() else "meta"
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8)):
    weight = torch.tensor([1.0, 2.0, 0.5]).to(device)  # the smell: host-made, copied each step
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
