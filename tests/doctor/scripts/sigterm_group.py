"""SIGTERM to the whole process group while the main process waits for its DataLoader workers,
as Slurm's scancel and `kill -TERM -PGID` send it: the workers die with the script, and torch's
SIGCHLD handler raises. Writes `--marker PATH` after batch `--at N` (default 8)."""

import sys
import time

import torch
from _common import mlp
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        time.sleep(0.01)  # the main process waits in the worker queue meanwhile
        return torch.randn(3, 16, 16), i % 10


marker = sys.argv[sys.argv.index("--marker") + 1]
at = int(sys.argv[sys.argv.index("--at") + 1]) if "--at" in sys.argv else 8
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(DataLoader(Slow(), batch_size=8, num_workers=2)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i == at:  # inside the profiled window: the test then sends SIGTERM to the group
        open(marker, "w").close()
