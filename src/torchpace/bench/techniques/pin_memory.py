"""`pin-memory`: page-locked host batches, so copies to the GPU are fast and can be asynchronous."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique, on_cuda
from torchpace.bench.workloads.base import Workload


class PinMemory(Technique):
    """Pin batches in page-locked memory and copy them with non_blocking=True."""

    name = "pin-memory"
    summary = "pin_memory=True + .to(device, non_blocking=True)"
    option = "pin_memory"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Only with an accelerator: on CPU there is no copy to speed up."""
        return on_cuda(device, "only helps with an accelerator (no host-to-device copy on CPU)")


TECHNIQUE = PinMemory()
