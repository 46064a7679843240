"""A training module run with `python -m trainpkg.train` (its sources count as the user's)."""

import torch
from torch.utils.data import DataLoader, TensorDataset

rows = TensorDataset(torch.randn(256, 32), torch.randint(0, 4, (256,)))
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _epoch in range(3):
    for x, y in DataLoader(rows, batch_size=16):
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
print("STAGE module done")
