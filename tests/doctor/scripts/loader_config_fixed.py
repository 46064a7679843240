"""Fixed twin: the worker is kept across epochs, and batches are pinned when there is a GPU."""

import torch
from _common import images, mlp, steps_from_argv
from torch import nn
from torch.utils.data import DataLoader

device = "cuda" if torch.cuda.is_available() else "cpu"
loader = DataLoader(
    images(32), batch_size=8, num_workers=1, persistent_workers=True,
    pin_memory=torch.cuda.is_available(),
)  # fmt: skip
model = mlp().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
while step < steps_from_argv():
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
