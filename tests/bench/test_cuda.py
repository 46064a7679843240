"""On a GPU machine: the accelerator-only techniques run, and the pipeline keeps the same math."""

from __future__ import annotations

import pytest
import torch

from torchpace.bench.harness import CEILING, run_bench
from torchpace.bench.workloads import get_workload

from .conftest import tiny_settings


@pytest.mark.cuda
def test_accelerator_techniques_run_and_keep_the_math_on_cuda() -> None:
    result = run_bench(get_workload("vision", "tiny"), torch.device("cuda"), tiny_settings(steps=3))
    names = {c.name for c in result.configs}
    assert {
        "pin-memory",
        "prefetcher (+pin-memory)",
        "sync-free-logging",
        "cudnn-benchmark",
    } <= names
    assert result.baseline.peak_memory_kind == "cuda max_memory_allocated"
    for name in ("pin-memory", "prefetcher (+pin-memory)", "sync-free-logging", "workers"):
        assert result.config(name).parity.status == "same", name
    assert result.config(CEILING).units_per_s > 0
    assert not result.failed


@pytest.mark.cuda
def test_memory_warmup_and_amp_on_cuda_text() -> None:
    result = run_bench(
        get_workload("text", "tiny"), torch.device("cuda"), tiny_settings(ceiling=False)
    )
    assert result.config("memory-warmup").parity.status == "same"
    amp = next(c for c in result.configs if c.name in ("amp-bf16", "amp-fp16"))
    assert amp.parity.status == "within-tolerance"
    assert not result.failed
