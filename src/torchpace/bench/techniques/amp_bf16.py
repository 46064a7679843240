"""`amp-bf16`: autocast to bfloat16 (fp32 range, no loss scaling needed)."""

from __future__ import annotations

import dataclasses

import torch

from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.technique import Technique
from torchpace.bench.workloads.base import Workload


def cpu_has_bf16() -> bool:
    """True when this CPU computes bf16 natively (AVX512-BF16 or AMX), so autocast can pay off."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


class AmpBf16(Technique):
    """torch.amp.autocast(device_type, dtype=torch.bfloat16) around forward and loss."""

    name = "amp-bf16"
    summary = "autocast to bf16: half the bytes, tensor-core math, no GradScaler"
    group = "amp"
    numerics = "bf16 autocast keeps 8 mantissa bits in matmuls/convolutions (changes numerics)"
    parity_rtol = 5e-2

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Needs bf16 hardware: an Ampere+ GPU, or a CPU with AVX512-BF16/AMX."""
        if device.type == "cuda":
            if not torch.cuda.is_bf16_supported():
                return False, "this GPU has no native bf16 (needs Ampere+); use amp-fp16"
            return True, ""
        if not cpu_has_bf16():
            return (
                False,
                "this CPU has no native bf16 (AVX512-BF16 or AMX); autocast would emulate it",
            )
        return True, ""

    def apply(self, config: RunConfig, settings: BenchSettings) -> RunConfig:
        """Autocast to bf16."""
        return dataclasses.replace(config, amp="bf16")


TECHNIQUE = AmpBf16()
