"""`workers`: decode and augment in DataLoader worker processes instead of the training loop."""

from __future__ import annotations

import dataclasses

import torch

from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.technique import Technique
from torchpace.data.loaders import default_num_workers


def default_workers(device: torch.device) -> int:
    """The worker policy's count for this host and device (torchpace.fixes.workers), at least 1.

    At least one: the technique exists to measure workers, even where the policy would not
    prescribe them (a CPU run on few cores), so that the bench shows what they cost there.
    """
    # One process: the bench runs no other rank on this machine.
    return max(1, default_num_workers(local_ranks=1, accelerator=device.type != "cpu"))


class Workers(Technique):
    """Load batches in worker processes, in parallel with the training step."""

    name = "workers"
    summary = "DataLoader(num_workers=N): host-side loading and augmentation off the training loop"

    def apply(self, config: RunConfig, settings: BenchSettings) -> RunConfig:
        """Turn on `settings.workers` workers (the harness fills in the policy's count)."""
        return dataclasses.replace(config, num_workers=settings.workers or 1)


TECHNIQUE = Workers()
