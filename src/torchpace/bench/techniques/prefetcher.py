"""`prefetcher`: copy the next batch to the GPU on a side stream while this step computes."""

from __future__ import annotations

import dataclasses

import torch

from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.technique import Technique, on_cuda
from torchpace.bench.workloads.base import Workload


class Prefetcher(Technique):
    """Overlap host-to-device copies with compute (torchpace.data.DevicePrefetcher)."""

    name = "prefetcher"
    summary = "DevicePrefetcher: the next batch's copy overlaps this step on a side CUDA stream"
    requires = ("pin-memory",)

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Only on CUDA: there are no copies to overlap on CPU."""
        return on_cuda(device, "overlaps host-to-device copies; there are none on CPU")

    def apply(self, config: RunConfig, settings: BenchSettings) -> RunConfig:
        """Feed the loop through the device prefetcher."""
        return dataclasses.replace(config, prefetcher=True)


TECHNIQUE = Prefetcher()
