"""A training loop that writes to stderr as scripts do: lines, a C++-style warning of its own,
binary bytes; with --kill it dies by SIGKILL after its last words (nothing of it may be lost)."""

import os
import signal
import sys

import torch
from _common import images, mlp
from torch import nn
from torch.utils.data import DataLoader

print(f"stdout isatty {sys.stdout.isatty()}, stderr isatty {sys.stderr.isatty()}", flush=True)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(DataLoader(images(), batch_size=8)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i < 5:
        print(f"script stderr {i}", file=sys.stderr, flush=True)
    if i == 1:
        os.write(2, b"\xff\xfe binary from the script\n")
        os.write(2, b"[W1123 22:13:16.1 script.cpp:1] the script's own warning\n")
    if i == 3 and "--kill" in sys.argv:
        os.write(2, b"last words\n")
        os.kill(os.getpid(), signal.SIGKILL)
