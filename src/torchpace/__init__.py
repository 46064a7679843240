"""torchpace: find and fix what slows PyTorch training.

The top-level package stays import-light (no torch): `torchpace analyze` must start fast.
Public names are re-exported lazily from their subpackages.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> subpackage that defines it; resolved on first attribute access.
_LAZY: dict[str, str] = {
    # Diagnose
    "analyze": "torchpace.analysis",
    "load_trace": "torchpace.trace",
    "load_traces": "torchpace.trace",
    "diagnose": "torchpace.doctor.diagnose",
    "Finding": "torchpace.doctor",
    "Severity": "torchpace.doctor",
    # Fix: the input pipeline
    "DevicePrefetcher": "torchpace.data",
    "fast_loader": "torchpace.data",
    "autotune_workers": "torchpace.data",
    "set_epoch": "torchpace.data",
    "ShardedIterableDataset": "torchpace.data",
    "BucketBatchSampler": "torchpace.data",
    "TokenBudgetBatchSampler": "torchpace.data",
    "pad_collate": "torchpace.data",
    # Fix: the step
    "Precision": "torchpace.train",
    "TrainStep": "torchpace.train",
    "apply_speedups": "torchpace.train",
    "checkpoint_modules": "torchpace.train",
    "warmup_memory": "torchpace.train",
    "find_batch_size": "torchpace.train",
    "scale_lr": "torchpace.train",
    # Watch
    "Throughput": "torchpace.monitor",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'torchpace' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
