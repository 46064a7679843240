"""torch.compile (the eager backend: no C++ compiler needed) in a plain loop."""

import torch
from _data import dataset, model
from torch.utils.data import DataLoader

net = torch.compile(model(), backend="eager")
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _epoch in range(3):
    for x, y in DataLoader(dataset(), batch_size=16):
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
print("STAGE compile done")
