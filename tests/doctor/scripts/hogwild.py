"""Hogwild training as pytorch/examples' mnist_hogwild does it: `model.share_memory()`, then
`--procs N` trainers started one by one with multiprocessing.Process (spawn), each stepping the
shared model with an optimizer of its own; the parent joins them, then tests the model.
`--fork` starts them with the fork method instead (the doctor does not run in forked copies);
`--cuda` puts the model on the GPU (torch shares CUDA tensors between processes through IPC).
`--helper` also starts a process that gets no model (it counts to `--iters` and prints) while
the parent trains in its own process: a helper's work, not Hogwild."""

import sys
import time

import torch
import torch.multiprocessing as mp
from _common import images, mlp, take
from torch import nn
from torch.utils.data import DataLoader


def train(rank: int, model: nn.Module) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    device = next(model.parameters()).device
    for x, y in take(DataLoader(images(4096), batch_size=8, shuffle=True)):
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"trainer {rank} done", flush=True)


def helper(n: int) -> None:
    for _ in range(n):
        time.sleep(0.01)
    print("helper done", flush=True)


if __name__ == "__main__":
    procs = int(sys.argv[sys.argv.index("--procs") + 1]) if "--procs" in sys.argv else 2
    mp.set_start_method("fork" if "--fork" in sys.argv else "spawn", force=True)
    if "--fork" in sys.argv:
        torch.set_num_threads(1)  # a forked child of a process with a thread pool can hang in it
    model = mlp().to("cuda" if "--cuda" in sys.argv else "cpu")
    if "--helper" in sys.argv:
        p = mp.Process(target=helper, args=(20,))
        p.start()
        train(-1, model)  # the training is the parent's own
        p.join()
    else:
        model.share_memory()
        processes = []
        for rank in range(procs):
            p = mp.Process(target=train, args=(rank, model))
            p.start()
            processes.append(p)
        for p in processes:
            p.join()
        with torch.no_grad():  # the test pass: batches of a loader, so steps of its own
            for x, _ in DataLoader(images(256), batch_size=8):
                model(x.to(next(model.parameters()).device))
    print("hogwild test done", flush=True)
