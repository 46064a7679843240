"""`amp-fp16`: autocast to float16 with a GradScaler against gradient underflow."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique, on_cuda
from torchpace.bench.workloads.base import Workload


class AmpFp16(Technique):
    """torch.amp.autocast("cuda", dtype=torch.float16) + torch.amp.GradScaler("cuda")."""

    name = "amp-fp16"
    summary = "autocast to fp16 + GradScaler: tensor-core math on any CUDA GPU"
    group = "amp"
    numerics = "fp16 autocast with loss scaling (changes numerics; skipped steps on overflow)"
    parity_rtol = 5e-2
    option = "amp"
    value = "fp16"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """fp16 with GradScaler is a CUDA recipe; on CPU use amp-bf16."""
        return on_cuda(device, "fp16 + GradScaler needs a CUDA GPU (on CPU see amp-bf16)")

    def max_speedup(self, device: torch.device) -> tuple[float, str] | None:
        """The tensor-core ratio over fp32."""
        return (16.0, "fp16 tensor cores over fp32 at peak")


TECHNIQUE = AmpFp16()
