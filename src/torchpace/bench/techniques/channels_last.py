"""`channels-last`: NHWC memory layout for convolutions (what tensor cores and oneDNN prefer)."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique
from torchpace.bench.workloads.base import Workload


class ChannelsLast(Technique):
    """model.to(memory_format=torch.channels_last) and the same for each input batch."""

    name = "channels-last"
    summary = "channels_last memory format: NHWC convolutions without layout transposes"
    numerics = "other convolution kernels may sum in another order (fp32 rounding only)"
    option = "channels_last"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Needs 2-d convolutions."""
        if not workload.has_convolutions:
            return False, f"the {workload.name} workload has no convolutions"
        return True, ""


TECHNIQUE = ChannelsLast()
