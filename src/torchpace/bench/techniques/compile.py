"""`compile`: torch.compile the model (fused kernels; costs compilation time before the first step)."""

from __future__ import annotations

import importlib.util
import shutil

import torch

from torchpace.bench.technique import Technique
from torchpace.bench.workloads.base import Workload


class Compile(Technique):
    """torch.compile(model); its cost shows in time to first step."""

    name = "compile"
    summary = "torch.compile(model): fused kernels, fewer launches"
    numerics = "fused kernels may round differently (fp32 rounding only)"
    option = "compile"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Inductor needs Triton on CUDA and a C++ compiler on CPU."""
        if device.type == "cuda" and importlib.util.find_spec("triton") is None:
            return False, "torch.compile on CUDA needs Triton (pip install triton)"
        if device.type == "cpu" and not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
            return False, "torch.compile on CPU needs a C++ compiler on PATH (apt-get install g++)"
        return True, ""


TECHNIQUE = Compile()
