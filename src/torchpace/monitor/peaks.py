"""Peak dense tensor throughput per device and dtype, from vendor datasheets, for MFU.

Figures are dense (no 2:4 sparsity) peak FLOP/s at boost clock; datasheets often print the sparse
figure, which is twice these. Sustained throughput is lower (clocks, power), so MFU of 40-60% is
already good. Sources, each read from the vendor's public datasheet or whitepaper:
  H100 SXM/PCIe/NVL: NVIDIA H100 Tensor Core GPU datasheet (2023).
  H200 SXM/NVL: NVIDIA H200 Tensor Core GPU datasheet (2024).
  A100: NVIDIA A100 Tensor Core GPU datasheet (2021), same figures for SXM4 and PCIe.
  V100: NVIDIA Tesla V100 GPU datasheet (2018); V100 has no bf16 and no TF32.
  T4: NVIDIA T4 Tensor Core GPU datasheet (2019).
  A10, L4, L40, L40S: NVIDIA A10 / L4 / L40 / L40S datasheets (2021-2023).
  RTX 3090, RTX 4090: NVIDIA Ampere GA102 and Ada Lovelace architecture whitepapers (FP16/BF16
    tensor with FP32 accumulate, the mode autocast uses).
  B200: NVIDIA HGX B200 specifications, per GPU (sparse figures halved).
  MI300X: AMD Instinct MI300X data sheet (2023).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

PeakDtype = Literal["bf16", "fp16", "tf32", "fp32"]


@dataclass(frozen=True)
class Peak:
    """A device's peak for one dtype, and where the figure comes from."""

    device: str
    dtype: str
    flops_per_s: float
    source: str


_T = 1e12
# (pattern on torch.cuda.get_device_name(), name, {dtype: TFLOP/s dense}, source). First match wins,
# so specific names come before the general ones ("H100 PCIe" before "H100").
_TABLE: list[tuple[str, str, dict[str, float], str]] = [
    (r"H100.*PCIe", "H100 PCIe", {"bf16": 756, "fp16": 756, "tf32": 378, "fp32": 51.2}, "NVIDIA H100 datasheet"),
    (r"H100.*NVL", "H100 NVL", {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60}, "NVIDIA H100 datasheet"),
    (r"H100|GH200", "H100 SXM", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}, "NVIDIA H100 datasheet"),
    (r"H200.*NVL", "H200 NVL", {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60}, "NVIDIA H200 datasheet"),
    (r"H200", "H200 SXM", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}, "NVIDIA H200 datasheet"),
    (r"B200", "B200", {"bf16": 2250, "fp16": 2250, "tf32": 1100}, "NVIDIA HGX B200 specifications"),
    (r"A100", "A100", {"bf16": 312, "fp16": 312, "tf32": 156, "fp32": 19.5}, "NVIDIA A100 datasheet"),
    (r"V100S", "V100S PCIe", {"fp16": 130, "fp32": 16.4}, "NVIDIA V100 datasheet"),
    (r"V100.*PCIE", "V100 PCIe", {"fp16": 112, "fp32": 14}, "NVIDIA V100 datasheet"),
    (r"V100", "V100 SXM2", {"fp16": 125, "fp32": 15.7}, "NVIDIA V100 datasheet"),
    (r"\bT4\b", "T4", {"fp16": 65, "fp32": 8.1}, "NVIDIA T4 datasheet"),
    (r"\bA10\b", "A10", {"bf16": 125, "fp16": 125, "tf32": 62.5, "fp32": 31.2}, "NVIDIA A10 datasheet"),
    (r"\bL4\b", "L4", {"bf16": 121, "fp16": 121, "tf32": 60, "fp32": 30.3}, "NVIDIA L4 datasheet"),
    (r"L40S", "L40S", {"bf16": 362, "fp16": 362, "tf32": 183, "fp32": 91.6}, "NVIDIA L40S datasheet"),
    (r"\bL40\b", "L40", {"bf16": 181, "fp16": 181, "tf32": 90.5, "fp32": 90.5}, "NVIDIA L40 datasheet"),
    (r"RTX 4090", "RTX 4090", {"bf16": 165.2, "fp16": 165.2, "tf32": 82.6, "fp32": 82.6}, "NVIDIA Ada Lovelace whitepaper"),
    (r"RTX 3090", "RTX 3090", {"bf16": 71, "fp16": 71, "tf32": 35.6, "fp32": 35.6}, "NVIDIA Ampere GA102 whitepaper"),
    (r"MI300X", "MI300X", {"bf16": 1307.4, "fp16": 1307.4, "tf32": 653.7, "fp32": 163.4}, "AMD Instinct MI300X data sheet"),
]  # fmt: skip


def lookup_peak(device_name: str, dtype: PeakDtype) -> Peak | None:
    """The datasheet peak for a device name (as CUDA/ROCm reports it), or None if unknown."""
    for pattern, name, peaks, source in _TABLE:
        if re.search(pattern, device_name):
            tflops = peaks.get(dtype)
            return None if tflops is None else Peak(name, dtype, tflops * _T, source)
    return None


def known_devices() -> list[str]:
    """The device names the table covers."""
    return [name for _, name, _, _ in _TABLE]
