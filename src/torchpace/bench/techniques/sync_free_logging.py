"""`sync-free-logging`: keep the running loss on the device instead of calling .item() every step."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique, on_cuda
from torchpace.bench.workloads.base import Workload


class SyncFreeLogging(Technique):
    """Accumulate `loss.detach()` on the device; read it once, not with a host sync per step."""

    name = "sync-free-logging"
    summary = "no .item() per step: the host never waits for the GPU to drain"
    option = "sync_free_logging"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Only an accelerator runs ahead of the host; on CPU .item() waits for nothing."""
        return on_cuda(device, "on CPU .item() waits for no device; there is no sync to remove")


TECHNIQUE = SyncFreeLogging()
