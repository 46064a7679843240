"""DDP over gloo where rank 1 records steps 1-2 with its own torch.profiler: that rank's doctor
steps aside while rank 0's finishes its window, and each step ends in an all_gather of the loss."""

import torch
import torch.distributed as dist
from _common import images, mlp, take
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
data = images(1024)
loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
model = DistributedDataParallel(mlp())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
own = torch.profiler.profile() if rank == 1 else None
for i, (x, y) in enumerate(take(loader)):
    if own is not None and i == 1:
        own.start()
    if own is not None and i == 3:
        own.stop()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(losses, loss.detach().reshape(1))  # metrics, as accelerate gathers them
dist.destroy_process_group()
print(f"rank {rank} done")
