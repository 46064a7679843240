"""A never-ending loop with no optimizer, DataLoader or backward: only time windows remain.

Each iteration runs a 256x256 linear layer (about a millisecond): light in events, so the profiled
window's memory bound (which counts what stopping the profiler adds per event) cannot end
profiling before the test's deadline, as a loop of tiny ops would on a fast machine. A module, as
real inference loops run: windows begin only once a model is at work."""

import torch

layer = torch.nn.Linear(256, 256)
x = torch.randn(256, 256)
with torch.no_grad():
    while True:
        x = torch.tanh(layer(x) / 16)
