"""sync-point: the host waits for the device."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.sync_point import sync_point
from torchpace.trace import Trace, load_trace
from torchpace.trace.synthetic import TraceBuilder

Load = Callable[[str], Trace]


def test_flags_item_and_explicit_syncs(trace_fixture: Load) -> None:
    (f,) = sync_point(trace_fixture("host_sync/event_sync_item"))
    causes = f.evidence["causes_per_step_count"]
    assert causes == {
        "aten::is_nonzero": 1.0,
        "cudaEventSynchronize": 1.0,
        "cudaDeviceSynchronize": 1.0,
    }
    assert f.evidence["syncs_per_step_count"] == 3
    assert 0 < f.evidence["blocked_ms_per_step"] < 1  # type: ignore[operator]
    # The fix follows the kinds counted: two synchronizes, one truth test; no .item() advice.
    assert f.fix.index("torch.cuda.synchronize()") < f.fix.index("`if tensor:`")
    assert "loss.item()" not in f.fix and "nonzero" not in f.fix


def test_reports_kinds_and_directions(trace_fixture: Load) -> None:
    (f,) = sync_point(trace_fixture("host_sync/event_sync_item"))
    assert f.evidence["kinds_per_step_count"] == {"branch": 1.0, "synchronize": 2.0}
    assert f.evidence["directions_per_step_count"] == {"device-to-host": 1.0, "none": 2.0}
    assert "1 tensor truth test" in f.summary and "2 explicit synchronizes" in f.summary


def test_cpu_trace_is_not_applicable(trace_fixture: Load) -> None:
    with pytest.raises(NotApplicable, match="no CUDA/HIP runtime calls"):
        sync_point(trace_fixture("loader_workers/cpu_sleepy_loader"))


def _item_loop(tmp_path: Path, with_item: bool) -> Trace:
    b = TraceBuilder()
    b.gpu_device()
    for n in range(3):
        t0 = n * 10_000
        b.step(n, t0, 10_000)
        b.op("aten::mm", t0 + 100, 50)
        b.kernel("volta_sgemm_128x64_nn", t0 + 160, 3000, launched_at=t0 + 110)
        if with_item:
            b.op("aten::item", t0 + 200, 3100, args={})
            b.op("aten::_local_scalar_dense", t0 + 210, 3080)
            b.runtime("cudaStreamSynchronize", t0 + 220, 2950)
        b.op("aten::add", t0 + 3400, 30)
        b.kernel("vectorized_elementwise_kernel", t0 + 3900, 100, launched_at=t0 + 3410)
    return load_trace(b.write(tmp_path / f"synthetic_item_{with_item}.json"))


def test_synthetic_item_costs_the_drained_queue(tmp_path: Path) -> None:
    (f,) = sync_point(_item_loop(tmp_path, with_item=True))
    assert f.evidence["syncs_per_step_count"] == 1
    assert f.evidence["blocked_ms_per_step"] == pytest.approx(2.95)
    # The GPU drained during the sync (kernel ends at 3160, sync at 3170) and waits until 3900.
    assert f.evidence["gpu_idle_during_ms_per_step"] == pytest.approx(0.01, abs=0.002)
    assert f.evidence["gpu_idle_after_ms_per_step"] == pytest.approx(0.73, abs=0.01)
    assert f.saving_ms == pytest.approx(0.74, abs=0.01)


def _drained_wait(tmp_path: Path, gpu_work: bool) -> Trace:
    """Each step the host blocks 6 ms in a stream sync; the GPU runs 1 ms of it (or nothing)."""
    b = TraceBuilder()
    b.gpu_device()
    for n in range(3):
        t0 = n * 10_000
        b.step(n, t0, 10_000)
        b.op("aten::mm", t0 + 100, 50)
        if gpu_work:
            b.kernel("volta_sgemm_128x64_nn", t0 + 200, 1_000, launched_at=t0 + 110)
        b.op("aten::item", t0 + 300, 6_100)
        b.op("aten::_local_scalar_dense", t0 + 310, 6_080)
        b.runtime("cudaStreamSynchronize", t0 + 320, 6_000)
        b.op("aten::add", t0 + 6_500, 30)
        b.kernel("vectorized_elementwise_kernel", t0 + 6_600, 3_000, launched_at=t0 + 6_510)
    return load_trace(b.write(tmp_path / f"synthetic_drained_{gpu_work}.json"))


def test_synthetic_idle_while_blocked_is_the_syncs_cost(tmp_path: Path) -> None:
    """The queue drains 1 ms into a 6 ms wait: the 5 ms the GPU then idles while the host stays
    blocked are the sync's doing, with the 0.28 ms until the next kernel."""
    (f,) = sync_point(_drained_wait(tmp_path, gpu_work=True))
    assert f.evidence["gpu_idle_during_ms_per_step"] == pytest.approx(5.12, abs=0.01)
    assert f.evidence["gpu_idle_after_ms_per_step"] == pytest.approx(0.28, abs=0.01)
    assert f.saving_ms == pytest.approx(5.4, abs=0.02)


def test_synthetic_wait_with_no_device_work_costs_nothing(tmp_path: Path) -> None:
    """A wait during which the GPU runs nothing drained no queue (vLLM's graph capture)."""
    (f,) = sync_point(_drained_wait(tmp_path, gpu_work=False))
    assert f.evidence["gpu_idle_during_ms_per_step"] == 0
    assert f.saving_ms == 0


def test_synthetic_loop_without_syncs_is_silent(tmp_path: Path) -> None:
    assert sync_point(_item_loop(tmp_path, with_item=False)) == []


def test_pageable_uploads_alone_are_left_to_pageable_copy(trace_fixture: Load) -> None:
    """Two blocking .to(device) of pageable batches per step: pageable-copy's finding, not this."""
    assert sync_point(trace_fixture("loader_workers/resnet50_v100_num_workers_0")) == []


HOLDOUT = Path(__file__).parents[2] / "fixtures" / "holdout"


def test_torchrec_split_copy_costs_the_idle_it_causes() -> None:
    """Held-out A100 TorchRec rank: each step the host blocks ~140 ms in a device-to-host copy
    queued behind the all-to-all; the GPU idles ~88 ms of it (the reading: 93 of 139 ms of idle
    fall inside these copies). The saving counts that idle, not only the 0.5 ms after the copy,
    and is the figure gpu-idle lists as 'waiting on syncs'."""
    from torchpace.doctor.rules.gpu_idle import gpu_idle

    trace = load_trace(HOLDOUT / "hta_a100_torchrec_rank0of16.json.gz")
    (f,) = sync_point(trace)
    assert 80 <= f.evidence["gpu_idle_during_ms_per_step"] <= 100  # type: ignore[operator]
    assert f.evidence["gpu_idle_after_ms_per_step"] < 10  # type: ignore[operator]
    assert 80 <= f.saving_ms <= 100  # type: ignore[operator]
    (idle,) = gpu_idle(trace)
    assert idle.evidence["top_cause_name"] == "sync"
    by_cause = idle.evidence["idle_ms_by_cause"]
    assert isinstance(by_cause, dict)
    assert f.saving_ms == pytest.approx(by_cause["sync_ms"], abs=0.002)
    assert "while the host was blocked" in f.saving_method


def test_torchrec_fix_follows_the_pageable_copies_it_counts() -> None:
    """Held-out A100 TorchRec rank: 9 blocking uploads from pageable memory and 6 device-to-host
    copies per step, no .item() and no data-dependent shape. The fix leads with page-locked
    memory and non_blocking=True, then the batched read-back; no .item() or nonzero advice."""
    (f,) = sync_point(load_trace(HOLDOUT / "hta_a100_torchrec_rank0of16.json.gz"))
    assert f.evidence["kinds_per_step_count"] == {"h2d-copy": 9.0, "d2h-copy": 6.0}
    assert f.fix.index("pin_memory=True") < f.fix.index('.to("cpu", non_blocking=True)')
    assert 'x.to("cuda", non_blocking=True)' in f.fix
    assert "loss.item()" not in f.fix and "nonzero" not in f.fix


def test_a_slow_item_on_a_cpu_activities_trace_is_a_sync(trace_fixture: Load) -> None:
    """A100 run recorded with CPU activities only (HTA): one aten::item takes 4.7 ms of a 75.5 ms
    step (the others 25-43 us). Reading host memory takes microseconds: it waited for the GPU.
    Flagged from the op's duration, MEDIUM (6% of the step), with no saving (the GPU's idle is
    not in the trace). Before: not applicable, nothing said."""
    from torchpace.doctor.diagnose import diagnose
    from torchpace.doctor.finding import Severity

    trace = trace_fixture("no_distributed_info/no_distributed_info")
    assert not trace.has_gpu and not trace.runtime and trace.devices
    (f,) = sync_point(trace)
    assert f.evidence["kinds_per_step_count"] == {"item": 1.0}
    assert 4.5 < f.evidence["longest_read_ms"] < 5  # type: ignore[operator]
    assert "CPU activity only" in f.summary and "A100" in f.summary
    assert f.saving_ms is None and "loss.item()" in f.fix
    (judged,) = diagnose(trace, only=["sync-point"]).findings
    assert judged.severity is Severity.MEDIUM


def _cpu_activities_only(tmp_path: Path, gpu_in_header: bool) -> Trace:
    """synthetic: 3 steps each reading a value in 3 ms, no device activity recorded."""
    b = TraceBuilder()
    if gpu_in_header:
        b.gpu_device()
    for n in range(3):
        t0 = n * 10_000
        b.step(n, t0, 10_000)
        b.op("aten::item", t0 + 100, 3_000)
        b.op("aten::_local_scalar_dense", t0 + 101, 2_998)
    return load_trace(b.write(tmp_path / f"synthetic_cpu_activities_{gpu_in_header}.json"))


def test_synthetic_slow_reads_count_only_where_a_gpu_ran(tmp_path: Path) -> None:
    """A slow read on a machine with no GPU in the trace's header is host work, not a sync."""
    (f,) = sync_point(_cpu_activities_only(tmp_path, gpu_in_header=True))
    assert f.evidence["syncs_per_step_count"] == 1  # the outer read, not its inner op too
    assert f.evidence["blocked_ms_per_step"] == pytest.approx(3.0)
    with pytest.raises(NotApplicable):
        sync_point(_cpu_activities_only(tmp_path, gpu_in_header=False))
