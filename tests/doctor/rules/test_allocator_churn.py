"""allocator-churn: cudaMalloc/cudaFree after warm-up, reserved memory that swings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.finding import Severity
from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.allocator_churn import allocator_churn
from torchpace.trace import Trace, load_trace
from torchpace.trace.synthetic import TraceBuilder

Load = Callable[[str], Trace]


def test_flags_the_benchmark_allocations(trace_fixture: Load) -> None:
    trace = trace_fixture("cupti_alloc_benchmark/benchmark_cupti_alloc")
    (f,) = allocator_churn(trace)
    assert 10 <= f.evidence["malloc_per_step_count"] <= 28  # type: ignore[operator]
    assert 5 <= f.evidence["free_per_step_count"] <= 17  # type: ignore[operator]
    assert f.evidence["alloc_call_ms_per_step"] > 100  # type: ignore[operator]
    (judged,) = diagnose(trace, only=["allocator-churn"]).findings
    assert judged.severity is Severity.HIGH  # the policy: its saving is most of the step
    assert "warm-up" in f.summary and f.caveat
    for name in ("warmup_memory", "BucketBatchSampler", "expandable_segments:True"):
        assert name in f.fix


def test_steady_gpu_loop_is_silent(trace_fixture: Load) -> None:
    assert allocator_churn(trace_fixture("loader_workers/resnet50_v100_num_workers_0")) == []


def test_cpu_trace_is_not_applicable(trace_fixture: Load) -> None:
    with pytest.raises(NotApplicable):
        allocator_churn(trace_fixture("healthy/cpu_fast_loader"))


def _loop(tmp_path: Path, mallocs_after_first: bool, swing: bool) -> Trace:
    b = TraceBuilder()
    for n in range(4):
        t0 = n * 10_000
        b.step(n, t0, 10_000)
        b.runtime("cudaLaunchKernel", t0 + 50, 5)
        if n == 0 or mallocs_after_first:
            b.runtime("cudaMalloc", t0 + 100, 400)
            b.runtime("cudaFree", t0 + 600, 300)
        reserved = 2_000_000_000 if not swing or n % 2 else 1_000_000_000
        b.memory(t0 + 1000, 1024, 500_000_000, reserved)
    return load_trace(b.write(tmp_path / f"synthetic_alloc_{mallocs_after_first}_{swing}.json"))


def test_synthetic_first_step_allocations_are_warm_up(tmp_path: Path) -> None:
    assert allocator_churn(_loop(tmp_path, mallocs_after_first=False, swing=False)) == []


def test_synthetic_allocations_every_step(tmp_path: Path) -> None:
    (f,) = allocator_churn(_loop(tmp_path, mallocs_after_first=True, swing=False))
    assert f.evidence["malloc_per_step_count"] == 1 and f.evidence["free_per_step_count"] == 1
    assert f.saving_ms == pytest.approx(0.7)


def test_synthetic_reserved_memory_swing(tmp_path: Path) -> None:
    (f,) = allocator_churn(_loop(tmp_path, mallocs_after_first=False, swing=True))
    assert f.evidence["reserved_swing_bytes"] == 1_000_000_000
    assert "reserved memory swings by 1.0 GB" in f.summary


def test_synthetic_graph_capture_allocations_are_not_churn(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.op("capture_8192_PIECEWISE", 0, 40_000, cat="user_annotation")  # no steps: one window
    for n in range(4):
        t0 = n * 10_000
        b.runtime("cudaFree", t0 + 100, 300)  # the cache is freed before capturing
        b.runtime("cudaStreamBeginCapture", t0 + 500, 5)
        b.runtime("cudaMalloc", t0 + 600, 20)  # the graph's private pool
        b.runtime("cudaStreamEndCapture", t0 + 900, 5)
    assert allocator_churn(load_trace(b.write(tmp_path / "synthetic_capture_alloc.json"))) == []


def test_cold_allocator_of_a_single_run_is_not_churn(trace_fixture: Load) -> None:
    """A small A100 program run once, no steps (HTA): the caching allocator's first 3 cudaMalloc,
    none ever freed. Before, one of them (after the window's first 25%) was called churn."""
    trace = trace_fixture("cold_allocator/event_sync_multi_stream")
    assert trace.info.step_source == "window"
    assert len(trace.runtime_of_kind("malloc")) == 3 and not trace.runtime_of_kind("free")
    assert allocator_churn(trace) == []


def _window(tmp_path: Path, name: str, reserved: list[int], calls: list[str]) -> Trace:
    """synthetic: one window (no steps) of allocator calls and reserved-memory samples."""
    b = TraceBuilder()
    b.op("aten::mm", 0, 100_000)
    for n, call in enumerate(calls):
        b.runtime(call, 10_000 * (n + 3), 300)
    for n, r in enumerate(reserved):
        b.memory(10_000 * (n + 3) + 500, 1024, r // 2, r)
    return load_trace(b.write(tmp_path / f"synthetic_window_{name}.json"))


def test_synthetic_window_whose_reserved_memory_only_grows(tmp_path: Path) -> None:
    """Frees and re-allocations, but reserved memory never falls: the frees gave nothing back to
    the device (a library's workspace), the cache only filled. Growth is not churn."""
    calls = ["cudaMalloc", "cudaFree", "cudaMalloc", "cudaMalloc", "cudaFree", "cudaMalloc"]
    reserved = [1 << 30, 2 << 30, 2 << 30, 3 << 30, 4 << 30, 5 << 30]
    assert allocator_churn(_window(tmp_path, "grows", reserved, calls)) == []


def test_synthetic_window_that_gives_memory_back_and_asks_again(tmp_path: Path) -> None:
    calls = ["cudaMalloc", "cudaFree", "cudaMalloc", "cudaFree", "cudaMalloc", "cudaFree"]
    reserved = [2 << 30, 1 << 30, 2 << 30, 1 << 30, 2 << 30, 1 << 30]
    (f,) = allocator_churn(_window(tmp_path, "churns", reserved, calls))
    assert f.evidence["reserved_swing_bytes"] == 1 << 30
    assert f.evidence["malloc_per_step_count"] == 3 and f.evidence["free_per_step_count"] == 3
