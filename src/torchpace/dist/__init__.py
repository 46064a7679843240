"""DDP through torchrun: init, wrap, a sharded loader, and rank helpers."""

from torchpace.dist.data import EpochLoader, loader
from torchpace.dist.ddp import wrap
from torchpace.dist.setup import (
    DistInfo,
    any_rank,
    barrier,
    info,
    init,
    initialized,
    is_main,
    launched,
    shutdown,
)

__all__ = [
    "DistInfo",
    "EpochLoader",
    "any_rank",
    "barrier",
    "info",
    "init",
    "initialized",
    "is_main",
    "launched",
    "loader",
    "shutdown",
    "wrap",
]
