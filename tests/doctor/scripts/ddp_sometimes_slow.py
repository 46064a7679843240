"""A DDP script for torchrun (gloo on CPU) with a rank slow only sometimes: every 10th step rank 1
stalls (a slow disk read, a logger), and rank 0 waits for it in the gradients' all-reduce."""

import time

import torch
import torch.distributed as dist
from _common import images, mlp, steps_from_argv
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
rank = dist.get_rank()
data = images(2048)
loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
model = DistributedDataParallel(mlp())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(loader):
    if step == steps_from_argv(60):
        break
    if rank == 1 and step % 10 == 9:
        time.sleep(2.0)  # rank 1 alone, now and then: the others wait for it
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.destroy_process_group()
