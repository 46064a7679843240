"""Hogwild training: worker processes (torch.multiprocessing, spawn) update one shared model;
the main process only waits for them, then evaluates once."""

import torch
import torch.multiprocessing as mp
from _common import images, mlp, steps_from_argv
from torch import nn
from torch.utils.data import DataLoader


def train(model: nn.Module, epochs: int) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(epochs):
        for x, y in DataLoader(images(512), batch_size=8):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    mp.set_start_method("spawn", force=True)
    model = mlp()
    model.share_memory()
    procs = [mp.Process(target=train, args=(model, steps_from_argv(4))) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    with torch.no_grad():
        for x, _ in DataLoader(images(64), batch_size=8):
            model(x)
    print("hogwild done")
