"""Training whose model returns a dict: a per-token entropy first (logged detached, as TRL's SFT
logs it), the log-probs the loss uses after. One forward per step, and backward uses it: no
grad-in-eval."""

import torch
from _common import images, take
from torch import nn
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 32), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        logp = self.body(x).log_softmax(-1)
        return {"entropy": -(logp.exp() * logp).sum(-1), "log_probs": logp}


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8)):
    out = model(x)
    loss = nn.functional.nll_loss(out["log_probs"], y)
    entropy = out["entropy"].detach().mean()  # a metric: no backward through it
    opt.zero_grad()
    loss.backward()
    opt.step()
