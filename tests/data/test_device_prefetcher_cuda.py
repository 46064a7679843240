"""What only a GPU can show: copy/compute overlap, flat reserved memory, no stream races.

Run on the GPU machine: `pytest -m cuda tests/data`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from torchpace.data import DevicePrefetcher

pytestmark = pytest.mark.cuda


def _loader(batches: int = 8, mb: int = 32) -> DataLoader:
    # Large pinned batches: each copy takes long enough to see in a trace.
    rows = mb * 2**20 // (1024 * 4)
    data = torch.randn(batches * 4, rows // 4, 1024)
    return DataLoader(TensorDataset(data), batch_size=4, pin_memory=True)


def _compute(x: torch.Tensor) -> torch.Tensor:
    w = torch.randn(1024, 1024, device=x.device)
    for _ in range(20):  # enough kernels per batch to cover the next batch's copy
        x = torch.tanh(x @ w)
    return x.sum()


def _intervals(trace: dict, category: str) -> list[tuple[float, float]]:
    return [
        (e["ts"], e["ts"] + e["dur"])
        for e in trace["traceEvents"]
        if e.get("cat") == category and "dur" in e
    ]


def test_copies_overlap_compute_in_a_recorded_trace(tmp_path):
    loader = _loader()
    prefetcher = DevicePrefetcher(loader, "cuda")
    for (x,) in prefetcher:  # warm-up: cuBLAS handles, allocator pools
        _compute(x)
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for (x,) in prefetcher:
            _compute(x)
        torch.cuda.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    copies, kernels = _intervals(trace, "gpu_memcpy"), _intervals(trace, "kernel")
    assert copies and kernels
    overlapping = [(c0, c1) for c0, c1 in copies if any(k0 < c1 and c0 < k1 for k0, k1 in kernels)]
    # Every copy but the first (nothing computes before batch 0 arrives) overlaps a kernel.
    assert len(overlapping) >= len(copies) - 1, (len(overlapping), len(copies))


def test_reserved_memory_stays_flat_over_ten_epochs():
    prefetcher = DevicePrefetcher(_loader(batches=6, mb=8), "cuda")
    reserved = []
    for _ in range(10):
        for (x,) in prefetcher:
            _compute(x)
        torch.cuda.synchronize()
        reserved.append(torch.cuda.memory_reserved())
    assert max(reserved[1:]) <= reserved[1], reserved  # epoch 1 on: no growth at all


def test_one_side_stream_for_the_prefetcher_lifetime():
    prefetcher = DevicePrefetcher(_loader(batches=2, mb=1), "cuda")
    list(prefetcher)
    stream = prefetcher._side_stream
    list(prefetcher)
    assert prefetcher._side_stream is stream and stream != torch.cuda.current_stream()


def test_results_match_a_plain_loader_under_the_cuda_sanitizer():
    script = Path(__file__).with_name("data_cuda_sanitizer_check.py")
    env = dict(os.environ, TORCH_CUDA_SANITIZER="1")
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-4000:]
    assert "CSAN" not in result.stderr
