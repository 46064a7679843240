"""pageable-copy: host-to-device copies from memory that is not pinned."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.pageable_copy import pageable_copy
from torchpace.trace import Trace, load_trace
from torchpace.trace.synthetic import TraceBuilder

Load = Callable[[str], Trace]


def test_flags_the_v100_resnet_batch_copies(trace_fixture: Load) -> None:
    (f,) = pageable_copy(trace_fixture("loader_workers/resnet50_v100_num_workers_0"))
    assert f.evidence["copies_per_step_count"] == 2
    assert 19e6 < f.evidence["h2d_pageable_bytes_per_step"] < 20e6  # type: ignore[operator]
    assert 1 < f.evidence["host_blocked_ms_per_step"] < 4  # type: ignore[operator]
    assert f.saving_ms == f.evidence["host_blocked_ms_per_step"]
    (loc,) = f.locations
    assert (loc.file, loc.line, loc.count) == ("resnet50_profiler_api.py", 44, 12)
    assert "pin_memory=True" in f.fix and "non_blocking=True" in f.fix


def test_cpu_trace_is_not_applicable(trace_fixture: Load) -> None:
    with pytest.raises(NotApplicable, match="no device activity"):
        pageable_copy(trace_fixture("healthy/cpu_fast_loader"))


def test_synthetic_pinned_copies_are_fine(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 10_000)
    b.op("aten::copy_", 100, 200)
    b.memcpy("HtoD", "Pinned", "Device", 150, 2000, 50_000_000, issued_at=110)
    assert pageable_copy(load_trace(b.write(tmp_path / "synthetic_pinned.json"))) == []


def test_synthetic_small_pageable_copies_are_ignored(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 10_000)
    b.op("aten::copy_", 100, 20)
    b.memcpy("HtoD", "Pageable", "Device", 105, 2, 256, issued_at=102)
    assert pageable_copy(load_trace(b.write(tmp_path / "synthetic_small.json"))) == []


HOLDOUT = Path(__file__).parents[2] / "fixtures" / "holdout"


def test_saving_leaves_out_the_wait_for_the_gpu() -> None:
    """RTX 2080 Ti (held-out set): the 77 MB upload call blocks ~90 ms, of which ~70 ms wait for the
    previous iteration's kernels (pinning cannot remove those) and ~21 ms copy."""
    (f,) = pageable_copy(load_trace(HOLDOUT / "param_rtx2080ti_resnet_workers.json.gz"))
    copy_ms = f.evidence["copy_ms_per_step"]
    assert 15 < copy_ms < 30  # type: ignore[operator]
    assert f.saving_ms is not None and f.saving_ms < 1.5 * copy_ms  # type: ignore[operator]


def test_rocm_synchronous_upload_is_flagged() -> None:
    """MI300X TimeSformer (held-out set): ROCm writes the source as `Host`; the upload is a
    synchronous hipMemcpyWithStream that keeps the host 1.7 ms for a 1.1 ms copy of 38.5 MB. (The
    reading's '20.8 ms' is the `.to(torch.bfloat16)` on the CPU just before it: no device copy.)"""
    (f,) = pageable_copy(load_trace(HOLDOUT / "tl_mi300xvf_timesformer_bf16_inference.json.gz"))
    assert f.evidence["copies_per_step_count"] == 1
    assert 38e6 < f.evidence["h2d_pageable_bytes_per_step"] < 39e6  # type: ignore[operator]
    assert 1.0 < f.evidence["copy_ms_per_step"] < 1.2  # type: ignore[operator]
    assert 1.5 < f.saving_ms < 2.0  # type: ignore[operator]
    assert "`Host`" in f.summary and "pinned" in f.summary


def test_synthetic_rocm_pinned_async_upload_is_fine(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 10_000)
    b.op("aten::copy_", 100, 200)
    b.memcpy("HtoD", "Host", "Device", 150, 2000, 50_000_000, issued_at=110, call="hipMemcpyAsync")
    assert pageable_copy(load_trace(b.write(tmp_path / "synthetic_rocm_pinned.json"))) == []
