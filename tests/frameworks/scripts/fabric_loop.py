"""Lightning Fabric around a plain loop."""

import torch
from _data import dataset, model
from lightning.fabric import Fabric
from torch.utils.data import DataLoader

fabric = Fabric(accelerator="cpu", devices=1)
fabric.launch()
net = model()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
net, opt = fabric.setup(net, opt)
loader = fabric.setup_dataloaders(DataLoader(dataset(), batch_size=16, shuffle=True))
for _epoch in range(3):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        fabric.backward(loss)
        opt.step()
print("STAGE fabric done")
