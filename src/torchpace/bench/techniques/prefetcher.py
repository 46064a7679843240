"""`prefetcher`: copy the next batch to the GPU on a side stream while this step computes."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique, on_cuda
from torchpace.bench.workloads.base import Workload


class Prefetcher(Technique):
    """Overlap host-to-device copies with compute (torchpace.data.DevicePrefetcher)."""

    name = "prefetcher"
    summary = "DevicePrefetcher: the next batch's copy overlaps this step on a side CUDA stream"
    requires = ("pin-memory",)
    option = "prefetcher"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Only on CUDA: there are no copies to overlap on CPU."""
        return on_cuda(device, "overlaps host-to-device copies; there are none on CPU")


TECHNIQUE = Prefetcher()
