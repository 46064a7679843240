"""An inference loop with no step signal (no optimizer, DataLoader or backward): many small ops and
Python calls per iteration, as generation loops make. Runs for --seconds S of its own CPU time
(default: forever): the doctor's quiet time before time windows is CPU time, so on a busy machine
the loop still reaches them."""

import sys
import time

import torch
from torch import nn

seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 1e9
layer = nn.Linear(16, 16)
end = time.thread_time() + seconds
with torch.no_grad():
    while time.thread_time() < end:
        t = torch.zeros(1, 16)
        for k in range(200):
            t = torch.tanh(layer(t)) + k * 1e-3
print("inference done")
