"""Fixed twin: the norm stays a tensor inside the graph; the host reads it outside, when logging."""

import torch
from _common import images, take
from torch import nn
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 32), nn.ReLU())
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(x)
        return self.head(h), h.detach().norm()


model = Net()
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(take(DataLoader(images(), batch_size=8))):
    logits, activation_norm = compiled(x)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print(f"activation norm {activation_norm.item():.2f}")  # read when logged, off the graph
