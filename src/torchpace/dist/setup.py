"""Process-group set-up from torchrun's environment; a single process works un-launched."""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: rank, world size, local rank, its device and the backend."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None  # None when running as a single process without a process group

    @property
    def is_main(self) -> bool:
        """True on rank 0."""
        return self.rank == 0


def initialized() -> bool:
    """True once a process group exists (False on builds without torch.distributed)."""
    return dist.is_available() and dist.is_initialized()


def _env_int(name: str) -> int:
    value = os.environ[name]
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a whole number; launch with torchrun") from None


def launched() -> bool:
    """True when torchrun (or an equivalent launcher) set RANK, WORLD_SIZE and LOCAL_RANK."""
    return all(name in os.environ for name in _LAUNCH_VARS)


def _local_device(local_rank: int) -> torch.device:
    if not torch.cuda.is_available():
        return torch.device("cpu")
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise ValueError(
            f"LOCAL_RANK={local_rank} but only {count} CUDA device(s) are visible; "
            f"launch at most {count} processes per node (torchrun --nproc-per-node {count})"
        )
    return torch.device("cuda", local_rank)


def info() -> DistInfo:
    """This process's place in the job (rank 0 of 1 when not distributed)."""
    if initialized():
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        backend = str(dist.get_backend())
        device = _local_device(local_rank) if backend != "gloo" else torch.device("cpu")
        return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, device, backend)
    local_rank = _env_int("LOCAL_RANK") if "LOCAL_RANK" in os.environ else 0
    return DistInfo(0, 1, local_rank, _local_device(local_rank), None)


def init(backend: str | None = None, *, timeout_s: float | None = None) -> DistInfo:
    """Join the process group torchrun describes: NCCL on GPUs, gloo on CPU, one device per rank.

    Without torchrun's variables it returns rank 0 of 1 and starts no process group, so the same
    script runs as `python train.py` and `torchrun --nproc-per-node N train.py`. Idempotent.
    """
    if initialized() or not launched():
        return info()
    if not dist.is_available():
        raise RuntimeError(
            "torchrun launched this process, but this torch build has no torch.distributed; "
            "install a build with distributed support or run it as a single process"
        )
    local_rank = _env_int("LOCAL_RANK")
    device = _local_device(local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # before NCCL starts, so each rank owns its GPU
    chosen = backend or ("nccl" if device.type == "cuda" else "gloo")
    timeout = datetime.timedelta(seconds=timeout_s) if timeout_s is not None else None
    # device_id binds NCCL's communicator to this rank's GPU up front (no lazy, guessed binding).
    device_id = device if chosen == "nccl" else None
    dist.init_process_group(chosen, timeout=timeout, device_id=device_id)
    return info()


def is_main() -> bool:
    """True on rank 0, and in a single process: log, save and print only where this holds."""
    return not initialized() or dist.get_rank() == 0


def barrier() -> None:
    """Wait for every rank (a no-op in a single process)."""
    if not initialized():
        return
    if dist.get_backend() == "nccl":
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()


def shutdown() -> None:
    """Leave the process group cleanly (a no-op when none was started)."""
    if initialized():
        dist.destroy_process_group()


def any_rank(flag: bool) -> bool:
    """True if `flag` is True on any rank (an all-reduce with MAX; just `flag` un-launched)."""
    if not initialized() or dist.get_world_size() == 1:
        return flag
    device = (
        torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
    )
    value = torch.tensor([int(flag)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())
