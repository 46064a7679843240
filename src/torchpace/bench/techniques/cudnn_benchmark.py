"""`cudnn-benchmark`: let cuDNN time its convolution algorithms and keep the fastest per shape."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique
from torchpace.bench.workloads.base import Workload


class CudnnBenchmark(Technique):
    """torch.backends.cudnn.benchmark = True."""

    name = "cudnn-benchmark"
    summary = "torch.backends.cudnn.benchmark=True: autotuned convolution algorithms"
    numerics = "another convolution algorithm may sum in another order (fp32 rounding only)"
    option = "cudnn_benchmark"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Needs cuDNN (a CUDA device) and convolutions to tune."""
        if device.type != "cuda":
            return False, "cuDNN runs only on a CUDA device"
        if not workload.has_convolutions:
            return False, f"the {workload.name} workload has no convolutions to autotune"
        return True, ""


TECHNIQUE = CudnnBenchmark()
