"""Fixed twin: pin memory exactly when there is a GPU to copy to."""

import torch
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader

device = "cuda" if torch.cuda.is_available() else "cpu"
loader = DataLoader(images(), batch_size=8, pin_memory=torch.cuda.is_available())
model = mlp().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(loader):
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
