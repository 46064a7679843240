"""Deaf to every stop: takes every signal it can, swallows BaseException around each fast step,
and trains forever. Only a deadline enforced without its cooperation ends it."""

import contextlib
import signal

import torch
from _common import images, mlp
from torch import nn
from torch.utils.data import DataLoader

heard = 0


def ignore(signum, frame):
    global heard
    heard += 1


for sig in range(1, signal.NSIG):
    if sig not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            signal.signal(sig, ignore)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(images(), batch_size=8)
while True:
    for x, y in loader:
        try:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        except BaseException:  # the point of this script
            pass
