"""`tf32`: run fp32 matmuls and convolutions on TensorFloat-32 tensor cores."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique
from torchpace.bench.workloads.base import Workload


class TF32(Technique):
    """torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32 (fp32 inputs, 10-bit mantissa math)."""

    name = "tf32"
    summary = "TF32 tensor cores for fp32 matmuls and convolutions"
    numerics = "TF32 keeps 10 mantissa bits in matmuls/convolutions (changes numerics)"
    parity_rtol = 2e-2
    option = "tf32"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Needs an Ampere or newer CUDA GPU (compute capability 8.0+)."""
        if device.type != "cuda":
            return False, "needs an Ampere+ CUDA GPU"
        major, minor = torch.cuda.get_device_capability(device)
        if major < 8:
            return False, f"needs an Ampere+ CUDA GPU; this one is sm_{major}{minor}"
        return True, ""

    def max_speedup(self, device: torch.device) -> tuple[float, str] | None:
        """The tensor-core ratio over fp32."""
        return (8.0, "TF32 tensor cores over fp32 at peak (A100: 156 vs 19.5 TFLOPS)")


TECHNIQUE = TF32()
