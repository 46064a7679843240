"""Smell: a compiled model whose forward logs a tensor's value with .item(), a graph break.

Dynamo cannot put a host read of a tensor's value into a graph: it splits the forward into two
graphs around it, and the host waits for the first graph's result at every call.
"""

import torch
from _common import images, take
from torch import nn
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 32), nn.ReLU())
        self.head = nn.Linear(32, 10)
        self.activation_norm = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        self.activation_norm = h.norm().item()  # the smell: a host read inside the graph
        return self.head(h)


model = Net()
compiled = torch.compile(model, backend="eager")  # dynamo without a compiler: breaks the same
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8)):
    loss = nn.functional.cross_entropy(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
