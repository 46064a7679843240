"""GPU stats degrade cleanly: None without CUDA, None NVML fields without nvidia-ml-py."""

from __future__ import annotations

import pytest
import torch

from torchpace.monitor import gpu_stats
from torchpace.monitor import nvml as nvml_module


def test_none_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_stats() is None


def test_cpu_device_gives_none():
    assert gpu_stats("cpu") is None


def test_missing_nvidia_ml_py_degrades(monkeypatch):
    def missing(device=None):
        raise ModuleNotFoundError("pynvml module not found, please install nvidia-ml-py")

    monkeypatch.setattr(torch.cuda, "utilization", missing)
    monkeypatch.setattr(torch.cuda, "device_memory_used", missing, raising=False)
    device = torch.device("cuda", 0)
    assert nvml_module._nvml_utilization(device) is None
    assert nvml_module._nvml_memory_used(device) is None


@pytest.mark.cuda
def test_real_gpu_sample():
    stats = gpu_stats()
    assert stats is not None and stats.memory_total_bytes > 0
