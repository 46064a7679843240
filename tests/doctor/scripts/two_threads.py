"""Two threads train two models at once; the main thread waits for them.

--pause S sleeps S seconds after each step (default 0): a run long in time but light in events."""

import sys
import threading
import time

import torch
from _common import images, mlp, steps_from_argv
from torch import nn
from torch.utils.data import DataLoader

PAUSE = float(sys.argv[sys.argv.index("--pause") + 1]) if "--pause" in sys.argv else 0.0


def train(seed: int) -> None:
    torch.manual_seed(seed)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps_from_argv(30)):
        for x, y in DataLoader(images(64), batch_size=8):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(PAUSE)


threads = [threading.Thread(target=train, args=(s,), name=f"trainer-{s}") for s in (0, 1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("both trained")
