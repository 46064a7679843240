"""trace/blocking.py: the runtime calls in which the host waited on the device or the driver."""

from __future__ import annotations

from pathlib import Path

from torchpace.trace import load_trace
from torchpace.trace.blocking import driver_init_calls, host_waits
from torchpace.trace.synthetic import TraceBuilder

CORPUS = Path(__file__).parents[1] / "fixtures" / "corpus"


def test_synthetic_waits(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 10_000)
    b.runtime("cudaStreamSynchronize", 100, 50)
    b.memcpy("DtoH", "Device", "Pageable", 300, 10, 64, issued_at=200, call_us=120)  # waits
    b.memcpy("DtoH", "Device", "Pinned", 500, 10, 64, issued_at=400)  # returns at once
    b.memcpy("HtoD", "Pageable", "Device", 700, 10, 64, issued_at=600)  # staged: pageable-copy's
    b.memcpy("DtoD", "Device", "Device", 900, 10, 64, issued_at=800, call="hipMemcpyWithStream")
    waits = host_waits(load_trace(b.write(tmp_path / "synthetic_waits.json")))
    assert [(w.call.name, w.direction) for w in waits] == [
        ("cudaStreamSynchronize", None),
        ("cudaMemcpyAsync", "DtoH"),
        ("hipMemcpyWithStream", "DtoD"),
    ]


def test_synthetic_pinning_host_memory_is_not_start_up(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 130_000)
    b.runtime("cudaHostAlloc", 0, 50_000)
    b.runtime("cudaStreamCreateWithFlags", 60_000, 50_000)
    b.runtime("cudaLaunchKernel", 120_000, 5)
    trace = load_trace(b.write(tmp_path / "synthetic_init.json"))
    assert [r.name for r in driver_init_calls(trace)] == ["cudaStreamCreateWithFlags"]


def test_recorded_v100_resnet50_driver_start_up() -> None:
    """The first launches and stream/event creations of the process take seconds (lazy init)."""
    trace = load_trace(CORPUS / "kineto_v100_resnet50_autograd_nw4.pt.trace.json.gz")
    slow = driver_init_calls(trace)
    names = {r.name for r in slow}
    assert {"cudaLaunchKernel", "cudaStreamCreateWithFlags"} <= names
    assert sum(r.dur_us for r in slow) > 3e6
    assert all(r.kind not in ("sync", "memcpy", "malloc", "free") for r in slow)


HOLDOUT = Path(__file__).parents[1] / "fixtures" / "holdout"


def test_synthetic_pageable_upload_waits_for_the_queue_ahead(tmp_path: Path) -> None:
    """A pageable upload issued while a kernel runs copies only once the kernel is done."""
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 10_000)
    b.kernel("volta_sgemm_128x64_nn", 0, 3_000)
    # issued at 1000 while the GEMM runs: waits until 3000, copies 3000-4000, returns at 4000
    b.memcpy("HtoD", "Pageable", "Device", 3_000, 1_000, 64 << 20, issued_at=1_000, call_us=3_000)
    # issued on an idle GPU: staged at once (pageable-copy's, not a wait)
    b.memcpy("HtoD", "Pageable", "Device", 6_100, 1_000, 64 << 20, issued_at=6_000, call_us=1_100)
    (wait,) = host_waits(load_trace(b.write(tmp_path / "synthetic_upload.json")))
    assert (wait.call.ts_us, wait.end_us, wait.dur_us) == (1_000, 3_000, 2_000)


def test_recorded_pageable_uploads_wait_for_the_previous_iteration() -> None:
    """RTX 2080 Ti (held-out set): each 77 MB pageable batch upload first waits for the previous
    iteration's kernels (the GPU is 99% busy in them), then copies for 13-23 ms."""
    trace = load_trace(HOLDOUT / "param_rtx2080ti_resnet_workers.json.gz")
    queued = [w for w in host_waits(trace) if w.until_us is not None]
    assert len(queued) >= 10
    assert sum(w.dur_us for w in queued) > 1e6  # seconds of waiting on the GPU's pace
    for w in queued:
        assert w.copy is not None and w.copy.src_kind == "Pageable"
        assert 10_000 < w.call.end_us - w.end_us < 30_000  # what is left is the copy
