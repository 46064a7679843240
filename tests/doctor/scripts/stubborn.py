"""Never stops by itself: catches BaseException around every step and keeps its own SIGALRM."""

import signal

import torch
from _common import images, mlp
from torch import nn
from torch.utils.data import DataLoader

ticks = 0


def on_alarm(signum, frame):
    global ticks
    ticks += 1
    signal.alarm(1)  # re-arms the process's one interval timer


signal.signal(signal.SIGALRM, on_alarm)
signal.alarm(1)
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
        except BaseException as exc:  # the point of this script
            print("swallowed", type(exc).__name__)
