"""`memory-warmup`: run the longest batch once first, so the caching allocator reserves its peak early."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique
from torchpace.bench.workloads.base import Workload


class MemoryWarmup(Technique):
    """Forward and backward on the largest batch before training (no optimizer step)."""

    name = "memory-warmup"
    summary = "warm_memory on the longest batch: no allocator growth or fragmentation mid-run"
    option = "warmup_memory"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Needs the CUDA caching allocator and batches whose shapes vary."""
        if device.type != "cuda":
            return False, "the CPU has no caching allocator to warm"
        if not workload.variable_length:
            return (
                False,
                "every batch has the same shape; the first step already warms the allocator",
            )
        return True, ""


TECHNIQUE = MemoryWarmup()
