"""Where this process sits in a DDP job: replicas and rank, from arguments or torch.distributed."""

from __future__ import annotations

import torch.distributed as dist


def resolve_replicas(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """Return (num_replicas, rank), defaulting to the initialised process group or (1, 0)."""
    initialised = dist.is_available() and dist.is_initialized()
    if num_replicas is None:
        num_replicas = dist.get_world_size() if initialised else 1
    if rank is None:
        rank = dist.get_rank() if initialised else 0
    if num_replicas < 1:
        raise ValueError(f"num_replicas must be >= 1, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(
            f"rank must be in [0, num_replicas={num_replicas}), got {rank}; "
            "pass the rank of this process or leave it None to read torch.distributed"
        )
    return num_replicas, rank
