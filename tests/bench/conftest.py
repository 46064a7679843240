"""Tiny bench runs shared by the bench tests: a few steps of tiny models on CPU, run once per session."""

from __future__ import annotations

import pytest
import torch

from torchpace.bench.config import BenchSettings
from torchpace.bench.harness import run_bench
from torchpace.bench.results import BenchResult
from torchpace.bench.workloads import get_workload

CPU = torch.device("cpu")


def tiny_settings(**changes: object) -> BenchSettings:
    """Two measured steps, one warm-up, one repeat, one worker, eager compile: seconds, not minutes."""
    base: dict[str, object] = {
        "steps": 2,
        "warmup": 1,
        "repeat": 1,
        "workers": 1,
        "compile_backend": "eager",
    }
    return BenchSettings(**{**base, **changes})  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def vision_result() -> BenchResult:
    """Every technique on the tiny vision workload."""
    return run_bench(get_workload("vision", "tiny"), CPU, tiny_settings())


@pytest.fixture(scope="session")
def text_result() -> BenchResult:
    """Every technique on the tiny text workload, two repeats (spreads over repeats)."""
    return run_bench(get_workload("text", "tiny"), CPU, tiny_settings(repeat=2, steps=3))
