"""`amp-bf16`: autocast to bfloat16 (fp32 range, no loss scaling needed)."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique
from torchpace.bench.workloads.base import Workload
from torchpace.environment.probe import cpu_bf16


def cpu_has_bf16() -> bool:
    """True when this CPU computes bf16 natively (AVX512-BF16 or AMX), so autocast can pay off."""
    return cpu_bf16() in ("amx", "avx512_bf16")


# The most bf16 autocast can gain over fp32 (peak matmul rates, plus half the bytes moved):
# tensor cores 8-16x on NVIDIA (A100: 312 vs 19.5 TFLOPS); AMX tiles ~16x per core; AVX512-BF16
# doubles the FLOPs per instruction and halves the bytes, ~4x at most.
MAX_SPEEDUP = {
    "cuda": (16.0, "bf16 tensor cores over fp32 at peak"),
    "amx": (16.0, "AMX bf16 tiles over fp32 AVX-512 at peak"),
    "avx512_bf16": (4.0, "AVX512-BF16 doubles fp32's FLOPs and halves the bytes, at most"),
}


class AmpBf16(Technique):
    """torch.amp.autocast(device_type, dtype=torch.bfloat16) around forward and loss."""

    name = "amp-bf16"
    summary = "autocast to bf16: half the bytes, tensor-core math, no GradScaler"
    group = "amp"
    numerics = "bf16 autocast keeps 8 mantissa bits in matmuls/convolutions (changes numerics)"
    parity_rtol = 5e-2
    option = "amp"
    value = "bf16"

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

    def max_speedup(self, device: torch.device) -> tuple[float, str] | None:
        """The bf16-over-fp32 hardware ratio of this GPU or CPU."""
        return MAX_SPEEDUP.get("cuda" if device.type == "cuda" else str(cpu_bf16()))


TECHNIQUE = AmpBf16()
