"""A DDP training script for torchrun (gloo on CPU): rank 1 does extra work, so it straggles."""

import os
import time

import torch
import torch.distributed as dist
from _common import images, mlp, take
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
rank = dist.get_rank()
data = images(512)
loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
model = DistributedDataParallel(mlp())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(loader):
    if rank == 1:
        time.sleep(0.01)  # a slow rank: the others wait for it in all-reduce
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.destroy_process_group()
print(f"rank {rank} done", os.environ["WORLD_SIZE"])
