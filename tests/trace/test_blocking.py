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
