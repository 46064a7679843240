"""Trace fixtures for the GPU rules' tests: recorded traces (cached) and small synthetic builders.

Recorded traces decide what a rule judges; the synthetic_* builders only reach edge cases that no
recorded trace has (no GPU was available to record them: see docs/rules-calibration.md).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from torchpace.trace import Trace, load_trace, load_traces
from torchpace.trace.synthetic import TraceBuilder
from trace_fixtures import TRACE_FIXTURES as FIXTURES
from trace_fixtures import recorded as recorded  # the one loader of recorded traces

DDP = FIXTURES / "ddp_gloo_2rank"


@cache
def ranks(run: str) -> tuple[Trace, ...]:
    """Both ranks of a recorded 2-rank gloo run (balanced, straggler_seqlen, ...)."""
    return tuple(load_traces(DDP / run))


def gpu_builder(major: int = 8, minor: int = 0, steps: int = 3) -> TraceBuilder:
    """A builder with a CUDA device of the given compute capability and `steps` 10 ms steps."""
    b = TraceBuilder()
    b.gpu_device("NVIDIA A100-SXM4-40GB" if major >= 8 else "Tesla V100-SXM2-32GB")
    b.top["deviceProperties"][0].update(computeMajor=major, computeMinor=minor)
    for n in range(steps):
        b.step(n, n * 10_000, 10_000)
    return b


def add_kernels(b: TraceBuilder, name: str, per_step: int, dur: float, *, steps: int = 3) -> None:
    """`per_step` kernels called `name` of `dur` us in each 10 ms step, spread over its first half."""
    for n in range(steps):
        for i in range(per_step):
            b.kernel(name, n * 10_000 + 100 + i * 5_000 / per_step, dur)


def add_matmul(
    b: TraceBuilder, ts: float, shapes: list[list[int]], dtype: str, kernel: str, dur: float
) -> None:
    """An aten::addmm with recorded shapes/dtypes that launches one GEMM kernel."""
    types: list[Any] = [dtype, dtype, dtype, "Scalar", "Scalar"]
    b.op("aten::addmm", ts, 50, args={"Input Dims": [*shapes, [], []], "Input type": types})
    corr = b.runtime("cudaLaunchKernel", ts + 10, 5)
    b._gpu("kernel", kernel, ts + 20, dur, corr)


def write(b: TraceBuilder, tmp_path: Path, name: str) -> Trace:
    """Write a synthetic trace and read it back through the real loader."""
    assert name.startswith("synthetic_")
    return load_trace(b.write(tmp_path / f"{name}.json"))
