"""Wrap a model in DistributedDataParallel with sensible defaults (never DataParallel)."""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.nn.parallel import DistributedDataParallel

from torchpace.dist.setup import info, initialized


def wrap(model: nn.Module, **ddp_options: Any) -> nn.Module:
    """Move `model` to this rank's device and wrap it in DDP; unchanged in a single process.

    Defaults: `gradient_as_bucket_view=True` (gradients live in the all-reduce buckets: one copy
    less, less memory); `static_graph` and `find_unused_parameters` stay off unless asked for
    (finding unused parameters walks the autograd graph every step). Other keyword arguments go
    to DistributedDataParallel unchanged.
    """
    if isinstance(model, nn.DataParallel):
        raise TypeError(
            "wrap() got an nn.DataParallel model; pass the bare module instead: torchpace uses "
            "DistributedDataParallel (one process per GPU, launched with torchrun)"
        )
    if isinstance(model, DistributedDataParallel):
        raise TypeError("wrap() got a model that is already DistributedDataParallel; wrap it once")
    where = info()
    model = model.to(where.device)
    if not initialized() or where.world_size == 1:
        return model
    options: dict[str, Any] = {"gradient_as_bucket_view": True, **ddp_options}
    if where.device.type == "cuda":
        options.setdefault("device_ids", [where.device.index])
        options.setdefault("output_device", where.device.index)
    return DistributedDataParallel(model, **options)
