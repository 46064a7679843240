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
    assert ("aten::is_nonzero" in f.summary and ".item()" in f.fix) or "item()" in f.fix


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
    assert f.evidence["gpu_idle_after_ms_per_step"] == pytest.approx(0.73, abs=0.01)
    assert f.saving_ms == pytest.approx(0.73, abs=0.01)


def test_synthetic_loop_without_syncs_is_silent(tmp_path: Path) -> None:
    assert sync_point(_item_loop(tmp_path, with_item=False)) == []


def test_pageable_uploads_alone_are_left_to_pageable_copy(trace_fixture: Load) -> None:
    """Two blocking .to(device) of pageable batches per step: pageable-copy's finding, not this."""
    assert sync_point(trace_fixture("loader_workers/resnet50_v100_num_workers_0")) == []
