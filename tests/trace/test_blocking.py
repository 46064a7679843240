"""trace/blocking.py: the runtime calls in which the host waited on the device or the driver."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from torchpace.trace import Trace, load_trace
from torchpace.trace.blocking import driver_init_calls, host_memory_blocks, host_waits
from torchpace.trace.synthetic import TraceBuilder

Load = Callable[[str], Trace]

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


def test_synthetic_first_device_work_queued_behind_unrecorded_work(tmp_path: Path) -> None:
    """A copy issued at 1 ms that starts at 9 ms with nothing recorded before it, in a window
    whose recorded work (8.5 ms) could fill that lead, waited behind work the profiler did not
    record: 1-9 ms count as busy, not idle, and a note says so and why."""
    b = TraceBuilder()
    b.gpu_device()
    b.memcpy("DtoD", "Device", "Device", 9_000, 500, 64, issued_at=1_000)
    b.kernel("volta_sgemm_128x64_nn", 9_600, 8_000)
    t = load_trace(b.write(tmp_path / "synthetic_lead.json"))
    assert t.breakdown.gpu_busy_fraction is not None and t.breakdown.gpu_busy_fraction > 0.9
    (note,) = [n for n in t.info.notes if "opens on device work it did not record" in n]
    assert "no longer than the 8.5 ms of device work the trace records per step" in note


def test_a_late_first_kernel_with_no_evidence_is_idle(trace_fixture: Load) -> None:
    """HTA's simple-add benchmark (a fresh CUDA context in the window): its first kernel starts
    3.9 ms after its launch, but nothing waited for it and the trace records 0.016 ms of device
    work in all: no unrecorded step explains the delay, so those ms stay idle (before: the
    window's whole busy time was that lead)."""
    t = trace_fixture("unrecorded_lead/benchmark_simple_add")
    kernels_us = sum(k.dur_us for k in t.kernels)
    assert 10 < kernels_us < 30
    busy = t.breakdown.gpu_busy_fraction
    assert busy is not None and busy * t.breakdown.median_step_ms * 1e3 < 2 * kernels_us
    (note,) = [n for n in t.info.notes if "first device work" in n]
    assert "started 3.9 ms after the call that issued it" in note
    assert "not counted as GPU busy: nothing waited for it" in note


def test_synthetic_a_slow_first_launch_is_not_unrecorded_work(tmp_path: Path) -> None:
    """Time inside a launch call (module loading) is the driver's: the queue starts at its end."""
    b = TraceBuilder()
    b.gpu_device()
    b.kernel("volta_sgemm_128x64_nn", 9_050, 400, launched_at=0, call_us=9_000)
    t = load_trace(b.write(tmp_path / "synthetic_slow_launch.json"))
    assert not any("did not record" in n for n in t.info.notes)


def test_recorded_window_opening_mid_decode() -> None:
    """vLLM decode on MI300 (held-out set): the first recorded copy starts 7.8 ms after its call;
    the GPU was still running the previous step, so the window is ~97% busy, not 56%."""
    t = load_trace(HOLDOUT / "tl_mi300_vllm_gptoss_decode_graph.json.gz")
    assert t.breakdown.gpu_busy_fraction is not None and t.breakdown.gpu_busy_fraction > 0.9


def test_synthetic_rocm_host_memory_is_judged_by_its_call(tmp_path: Path) -> None:
    """ROCm writes `Host` for pinned and pageable memory alike: a synchronous call, or an
    asynchronous one that returned only once its copy was mostly done (staged), kept the host."""
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 10_000)
    b.memcpy("HtoD", "Host", "Device", 150, 1_000, 64 << 20, issued_at=100,
             call="hipMemcpyWithStream", call_us=1_100)  # fmt: skip
    b.memcpy("HtoD", "Host", "Device", 2_100, 1_000, 64 << 20, issued_at=2_000,
             call="hipMemcpyAsync", call_us=20)  # pinned: returns at once  # fmt: skip
    b.memcpy("HtoD", "Host", "Device", 4_100, 1_000, 64 << 20, issued_at=4_000,
             call="hipMemcpyAsync", call_us=1_050)  # staged  # fmt: skip
    b.memcpy("DtoH", "Device", "Host", 6_100, 1_000, 64 << 20, issued_at=6_000,
             call="hipMemcpyAsync", call_us=1_150)  # fmt: skip
    trace = load_trace(b.write(tmp_path / "synthetic_rocm_host.json"))
    blocks = [host_memory_blocks(c, trace.runtime_call_of(c)) for c in trace.copies]
    assert blocks == [True, False, True, True]
    # An upload on an idle GPU copies (pageable-copy's); the staged download is a wait.
    assert [(w.call.ts_us, w.direction) for w in host_waits(trace)] == [(6_000, "DtoH")]


def test_recorded_rocm_download_is_read_from_its_call() -> None:
    """MI300X Qwen (corpus): ROCm records the device activity of hipMemcpyWithStream(kind=2,
    DeviceToHost) as `Memcpy DtoD (Device -> Device)`; the call's kind is the direction."""
    trace = load_trace(CORPUS / "tl_mi300xvf_qwen05b_bf16_inference.json.gz")
    (copy,) = trace.copies
    call = trace.runtime_call_of(copy)
    assert call is not None and call.name == "hipMemcpyWithStream" and call.copy_kind == "DtoH"
    assert (copy.direction, copy.src_kind, copy.dst_kind) == ("DtoH", "Device", "Host")
    assert [w.direction for w in host_waits(trace) if w.copy is not None] == ["DtoH"]


def test_recorded_rocm_blocking_upload() -> None:
    """MI300X TimeSformer (held-out set): the 38.5 MB `.to("cuda")` is a synchronous
    hipMemcpyWithStream from `Host` memory: it keeps the host 1.7 ms for a 1.1 ms copy, on an idle
    GPU (copying, not waiting on the device)."""
    trace = load_trace(HOLDOUT / "tl_mi300xvf_timesformer_bf16_inference.json.gz")
    (upload,) = [c for c in trace.copies if c.direction == "HtoD"]
    call = trace.runtime_call_of(upload)
    assert call is not None and call.copy_kind == "HtoD" and upload.src_kind == "Host"
    assert host_memory_blocks(upload, call)
    assert all(w.call is not call for w in host_waits(trace))
