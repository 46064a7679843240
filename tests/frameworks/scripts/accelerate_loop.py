"""accelerate around a plain loop, gathering metrics every step as its examples do."""

import torch
from _data import dataset, model
from accelerate import Accelerator
from torch.utils.data import DataLoader

accelerator = Accelerator(cpu=True)
net = model()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
loader = DataLoader(dataset(), batch_size=16, shuffle=True)
net, opt, loader = accelerator.prepare(net, opt, loader)
for _epoch in range(3):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        accelerator.backward(loss)
        opt.step()
        accelerator.gather_for_metrics(loss.detach().reshape(1))
accelerator.print("STAGE accelerate done")
