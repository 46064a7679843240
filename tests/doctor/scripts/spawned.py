"""Training in processes the script spawns itself (torch.multiprocessing.spawn), as
pytorch/examples' imagenet does with --multiprocessing-distributed: `--ranks N` processes, a gloo
DDP job of their own when N > 1; `--fail` makes each raise after its loop; `--sleep S` adds S
seconds to each step; `--marker PATH` is created at process 0's 8th step; `--queue` joins as
Lightning's ddp_spawn does (start_processes(join=False), then rank 0's result from a queue)."""

import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _common import images, mlp, take
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader


def worker(rank: int, ranks: int, port: int, fail: bool, sleep: float, queue=None) -> None:
    model = mlp()
    if ranks > 1:
        url = f"tcp://127.0.0.1:{port}"
        dist.init_process_group("gloo", init_method=url, rank=rank, world_size=ranks)
        model = DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in enumerate(take(DataLoader(images(4096), batch_size=8))):
        if step == 8 and rank == 0 and "--marker" in sys.argv:
            open(sys.argv[sys.argv.index("--marker") + 1], "w").close()
        time.sleep(sleep)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if ranks > 1:
        dist.destroy_process_group()
    if queue is not None and rank == 0:
        queue.put("trained")
    if fail:
        raise ValueError(f"process {rank} failed after its loop")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    ranks = int(sys.argv[sys.argv.index("--ranks") + 1]) if "--ranks" in sys.argv else 1
    sleep = float(sys.argv[sys.argv.index("--sleep") + 1]) if "--sleep" in sys.argv else 0.0
    args = (ranks, free_port(), "--fail" in sys.argv, sleep)
    if "--queue" in sys.argv:
        queue = mp.get_context("spawn").SimpleQueue()
        context = mp.start_processes(worker, args=(*args, queue), nprocs=ranks, join=False)
        while not context.join():
            pass
        print(queue.get())
    else:
        mp.spawn(worker, args=args, nprocs=ranks)
    print("spawned training done")
