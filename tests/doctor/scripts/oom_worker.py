"""Smell: a DataLoader worker runs out of memory (its address space capped), the training process
does not: sample 12 is far larger than the others."""

import torch
from _common import mlp
from _memory_cap import cap_address_space
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Scans(Dataset):
    """Small images, and one huge volume."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if i == 12:
            volume = torch.zeros(64, 1024, 1024)  # 256 MiB, read whole to keep one slice
            return volume[0, :48, :16].reshape(3, 16, 16).clone(), 0
        return torch.randn(3, 16, 16), i % 10


def cap_worker(_: int) -> None:
    cap_address_space(128)  # the worker's own limit: the training process keeps its own


loader = DataLoader(Scans(), batch_size=2, num_workers=1, worker_init_fn=cap_worker)
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
