"""Smell: under torchrun, rank 1 runs out of memory (its address space capped) and rank 0 then dies
of the broken all-reduce: the report must say which rank ran out, and of what."""

import torch
import torch.distributed as dist
from _common import images, mlp, take
from _memory_cap import cap_address_space
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
rank = dist.get_rank()
data = images(512)
loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
model = DistributedDataParallel(mlp())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
if rank == 1:
    cap_address_space(200)
for step, (x, y) in enumerate(take(loader)):
    if rank == 1 and step == 4:
        x = torch.randn(65536, 3, 16, 16).repeat(2, 1, 1, 1)  # 384 MiB: its shard's huge batch
        y = y.repeat(16384)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.destroy_process_group()
