"""GPU utilisation and memory: NVML through torch (nvidia-ml-py, optional) plus the allocator.

NVML reports what nvidia-smi shows; torch maps its device index to NVML's (CUDA_VISIBLE_DEVICES).
Without nvidia-ml-py, or without a GPU, the NVML fields are None and nothing fails.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GpuStats:
    """One sample of a GPU's state; NVML fields are None when NVML is unavailable."""

    device: str
    utilization_percent: int | None  # share of the last sample period with a kernel running
    memory_used_bytes: int | None  # all processes, as nvidia-smi reports
    memory_total_bytes: int
    reserved_bytes: int  # held by this process's caching allocator
    max_allocated_bytes: int  # peak in live tensors since start (or reset_peak_memory_stats)


def _nvml_utilization(device: torch.device) -> int | None:
    try:
        return int(torch.cuda.utilization(device))
    except Exception:  # nvidia-ml-py missing, NVML not loadable, or no permission: degrade
        return None


def _nvml_memory_used(device: torch.device) -> int | None:
    used = getattr(torch.cuda, "device_memory_used", None)
    if used is None:
        return None
    try:
        return int(used(device))
    except Exception:  # as above: NVML is optional
        return None


def gpu_stats(device: torch.device | str | None = None) -> GpuStats | None:
    """Sample the GPU `device` (default: the current one); None without CUDA. No device sync."""
    if not torch.cuda.is_available():
        return None
    device = torch.device(device) if device is not None else torch.device("cuda")
    if device.type != "cuda":
        return None
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return GpuStats(
        device=str(device),
        utilization_percent=_nvml_utilization(device),
        memory_used_bytes=_nvml_memory_used(device),
        memory_total_bytes=int(torch.cuda.get_device_properties(device).total_memory),
        reserved_bytes=int(torch.cuda.memory_reserved(device)),
        max_allocated_bytes=int(torch.cuda.max_memory_allocated(device)),
    )
