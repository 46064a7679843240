"""Two threads train in lockstep, the second started after the first has taken two steps.

The first thread's steps are counted; the second's optimizer then steps least often overall (the
case in which the doctor once counted no step at all and ended in warm-up)."""

import threading

import torch
from _common import images, mlp, steps_from_argv
from torch import nn

both = threading.Barrier(2, timeout=60)
started = threading.Event()


def train(seed: int, lockstep_after: int) -> None:
    torch.manual_seed(seed)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = images(8).tensors
    try:
        for i in range(steps_from_argv(60)):
            if i == lockstep_after:
                started.set()
            if i >= lockstep_after:
                both.wait()
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    except threading.BrokenBarrierError:
        return  # the other thread stopped
    finally:
        both.abort()  # never leave the other thread waiting


first = threading.Thread(target=train, args=(0, 2), name="trainer-0")
first.start()
started.wait()
second = threading.Thread(target=train, args=(1, 0), name="trainer-1")
second.start()
first.join()
second.join()
print("both trained")
