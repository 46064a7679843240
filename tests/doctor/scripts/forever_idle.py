"""A never-ending loop with no optimizer, DataLoader or backward: only time windows remain.

Each iteration is a 256x256 matmul (about a millisecond): light in events, so the profiled window's
memory bound (which counts what stopping the profiler adds per event) cannot end profiling before
the test's deadline, as a loop of tiny ops would on a fast machine."""

import torch

x = torch.randn(256, 256)
while True:
    x = torch.tanh(x @ x.T / 256)
