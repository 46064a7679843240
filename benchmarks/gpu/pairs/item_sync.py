"""`.item()` every step, then a running loss kept on the device: `sync-point`.

    python benchmarks/gpu/pairs/item_sync.py --out DIR
    python benchmarks/gpu/pairs/item_sync.py --out DIR --size tiny --device cpu

Each step the host also does some work of its own (a 2 ms sleep stands in for logging, metrics
or preparing the next batch's metadata). With `.item()` the host waits for the GPU to finish
the step before it starts that work, so the GPU then idles; without it the host queues the next
step while the GPU still runs this one, and the two overlap.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch
from _pair import Pair, main
from torch import nn

HOST_WORK_S = 0.002
# (batch, width, layers): gpu is a few ms of fp32 GEMMs per step on an H100
SIZES = {"tiny": (32, 64, 2), "gpu": (2048, 2048, 4)}


def train(device: torch.device, size: str, fixed: bool) -> Iterator[None]:
    batch, width, layers = SIZES[size]
    torch.manual_seed(0)
    model = nn.Sequential(
        *[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(layers)]
    )
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=device)
    target = torch.randn(batch, width, device=device)
    running = torch.zeros((), device=device)
    losses: list[float] = []
    while True:
        loss = nn.functional.mse_loss(model(x), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if fixed:
            running += loss.detach()  # stays on the device; read once per log interval
        else:
            losses.append(loss.item())  # SYNC: the host waits here for the whole step
        time.sleep(HOST_WORK_S)  # the host's own work per step
        yield


PAIR = Pair("item_sync", "sync-point", "loss.item() every step -> loss kept on the device", train)

if __name__ == "__main__":
    raise SystemExit(main(PAIR))
