"""`workers`: decode and augment in DataLoader worker processes instead of the training loop."""

from __future__ import annotations

import dataclasses
import os

import torch

from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.technique import Technique
from torchpace.bench.workloads.base import Workload


def default_workers() -> int:
    """Workers for the cores this process may use, at most 8 (beyond that the batch is rarely the limit)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


class Workers(Technique):
    """Load batches in worker processes, in parallel with the training step."""

    name = "workers"
    summary = "DataLoader(num_workers=N): host-side loading and augmentation off the training loop"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Applies everywhere a process can fork workers."""
        return True, ""

    def apply(self, config: RunConfig, settings: BenchSettings) -> RunConfig:
        """Turn on `settings.workers` workers (default: one per usable core, at most 8)."""
        return dataclasses.replace(config, num_workers=settings.workers or default_workers())


TECHNIQUE = Workers()
