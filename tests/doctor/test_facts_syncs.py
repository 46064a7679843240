"""Sync points (doctor/facts/syncs.py): what the host waited for, in which direction, and why."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from torchpace.doctor.facts.syncs import sync_points
from torchpace.trace import Trace, load_trace, load_traces
from torchpace.trace.synthetic import TraceBuilder

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _step(tmp_path: Path, name: str, build: object) -> Trace:
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 10_000)
    b.op("aten::mm", 10, 20)
    b.kernel("volta_sgemm_128x64_nn", 40, 2_000, launched_at=15)
    build(b)  # type: ignore[operator]
    return load_trace(b.write(tmp_path / f"synthetic_{name}.json"))


def test_recorded_h100_owlv2_counts_every_sync_with_its_direction() -> None:
    """80 stream syncs inside .to(): 55 copies to pageable host memory, 25 blocking uploads."""
    trace = load_trace(FIXTURES / "corpus" / "tl_h100_owlv2_bf16_inference.json.gz")
    points = sync_points(trace)
    kinds = Counter(p.kind for p in points)
    assert kinds["d2h-copy"] == 55 and kinds["h2d-copy"] == 25
    assert Counter(p.direction for p in points)["device-to-host"] == 55
    # The 25 uploads wait for the queue ahead of them: most of the 359 ms the host is blocked.
    h2d_ms = sum(p.blocked_us for p in points if p.kind == "h2d-copy") / 1e3
    assert 300 < h2d_ms < 400


def test_recorded_dlrm_counts_gpu_waits_not_cpu_items() -> None:
    """57 .item() per rank run on CPU tensors; only TorchRec's ~10 copies wait on the GPU."""
    rank0 = load_traces(FIXTURES / "corpus" / "param_v100_dlrm_8rank")[0]
    items = rank0.ops_named({"aten::item"})
    assert len(items) > 50
    assert 8 <= len(sync_points(rank0)) <= 12


def test_recorded_pageable_uploads_that_wait_are_syncs() -> None:
    points = sync_points(
        load_trace(FIXTURES / "traces/loader_workers/resnet50_v100_num_workers_0.json.gz")
    )
    uploads = [p for p in points if p.kind == "h2d-copy"]
    assert uploads and all(p.direction == "host-to-device" for p in uploads)


def test_synthetic_copy_and_its_stream_sync_are_one_sync(tmp_path: Path) -> None:
    def build(b: TraceBuilder) -> None:
        b.op("aten::to", 100, 2_000)
        b.op("aten::copy_", 105, 1_990)
        b.memcpy("DtoH", "Device", "Pageable", 2_040, 10, 4096, issued_at=110, call_us=1_940)
        b.runtime("cudaStreamSynchronize", 2_060, 5)

    (p,) = sync_points(_step(tmp_path, "d2h", build))
    assert (p.kind, p.direction, p.cause) == ("d2h-copy", "device-to-host", "aten::to")
    assert len(p.calls) == 2 and p.blocked_us == 1_945


def test_synthetic_rocm_item_reads_to_the_host(tmp_path: Path) -> None:
    """ROCm labels the copy of hipMemcpyWithStream(DeviceToHost) "DtoD"; .item() reads the host."""

    def build(b: TraceBuilder) -> None:
        b.op("aten::item", 100, 2_000)
        b.op("aten::_local_scalar_dense", 105, 1_990)
        b.memcpy(
            "DtoD",
            "Device",
            "Device",
            2_040,
            1,
            1,
            issued_at=110,
            call="hipMemcpyWithStream",
            call_us=1_940,
        )

    (p,) = sync_points(_step(tmp_path, "rocm_item", build))
    assert (p.kind, p.direction) == ("item", "device-to-host")


def test_synthetic_non_blocking_copies_and_cpu_items_are_not_syncs(tmp_path: Path) -> None:
    def build(b: TraceBuilder) -> None:
        b.op("aten::item", 100, 5)  # a CPU tensor: no runtime call
        b.op("aten::copy_", 200, 20)
        b.memcpy("HtoD", "Pinned", "Device", 2_100, 10, 4096, issued_at=205)
        b.op("aten::copy_", 300, 20)
        b.memcpy("DtoH", "Device", "Pinned", 2_200, 10, 4096, issued_at=305)

    assert sync_points(_step(tmp_path, "async", build)) == []


def test_synthetic_bare_synchronize(tmp_path: Path) -> None:
    def build(b: TraceBuilder) -> None:
        b.runtime("cudaDeviceSynchronize", 2_500, 100)

    (p,) = sync_points(_step(tmp_path, "bare", build))
    assert (p.kind, p.direction, p.cause, p.location) == (
        "synchronize",
        "none",
        "cudaDeviceSynchronize",
        None,
    )
