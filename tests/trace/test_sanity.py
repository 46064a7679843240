"""Durations that measure nothing (missing, negative, absurd, all zero) are dropped or said, never
reported as 0 ms or as a finding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.errors import TraceError
from torchpace.trace import load_trace
from torchpace.trace.read import read_trace_bytes

# A real CUDA trace: 3 ProfilerStep# ranges, ops, kernels, a copy and syncs.
REAL = Path(__file__).parents[1] / "fixtures" / "traces" / "host_sync" / "event_sync_item.json.gz"


def _with_durations(tmp_path: Path, dur: Any, cats: set[str] | None = None) -> Path:
    """The real trace with the `dur` of every range (of the given categories) replaced."""
    doc = json.loads(read_trace_bytes(REAL))
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and (cats is None or e.get("cat") in cats):
            if dur is None:
                del e["dur"]
            else:
                e["dur"] = dur(e["dur"]) if callable(dur) else dur
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("dur", [0, 1e-300])  # none recorded; or under a nanosecond, as none
def test_all_durations_zero_say_what_cannot_be_measured(tmp_path: Path, dur: float) -> None:
    trace = load_trace(_with_durations(tmp_path, dur))
    assert trace.info.notes[-3:] == (
        f"every one of the {len(trace.steps)} steps lasts 0 ms (no duration of 1 ns or more "
        "recorded): step times cannot be measured",
        f"none of the {len(trace.host_ops)} host ranges has a duration: time per phase and per op "
        "cannot be measured",
        f"none of the {len(trace.gpu_events)} GPU kernels, copies and memsets has a duration: "
        "GPU busy time cannot be measured",
    )
    assert trace.breakdown.gpu_busy_fraction is None  # unknown, not 0% busy
    assert trace.breakdown.median_step_ms == 0  # no step time: no share, no finding from it
    assert diagnose(trace).findings == ()


def test_device_durations_zero_leave_gpu_busy_unknown(tmp_path: Path) -> None:
    trace = load_trace(_with_durations(tmp_path, 0, {"kernel", "gpu_memcpy", "gpu_memset"}))
    assert trace.info.notes[-1].startswith("none of the ")
    assert trace.breakdown.median_step_ms > 0
    assert trace.breakdown.gpu_busy_fraction is None
    assert all(s.gpu_busy_ms is None for s in trace.breakdown.steps)


def test_the_real_trace_has_no_such_note() -> None:
    trace = load_trace(REAL)
    assert not [n for n in trace.info.notes if "cannot be measured" in n]
    assert trace.breakdown.gpu_busy_fraction is not None


def test_negative_durations_are_dropped_and_counted(tmp_path: Path) -> None:
    good = load_trace(REAL)
    trace = load_trace(_with_durations(tmp_path, lambda d: -d, {"kernel"}))
    assert not trace.kernels and trace.host_ops == good.host_ops
    assert trace.copies == good.copies  # still measure GPU busy time
    assert trace.info.notes[-1] == (
        f"dropped {len(good.kernels)} events that cannot be placed or measured: dur is a "
        f"negative number ({len(good.kernels)} events)"
    )


def test_missing_durations_everywhere_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as info:
        load_trace(_with_durations(tmp_path, None))
    assert str(info.value).startswith(
        "t.json has no profiled range that can be read: dropped 33 events that cannot be "
        "placed or measured: dur is missing (33 events)"
    )


def test_durations_longer_than_a_day_are_dropped_and_said(tmp_path: Path) -> None:
    good = load_trace(REAL)
    trace = load_trace(_with_durations(tmp_path, 1e297, {"kernel"}))
    assert not trace.kernels and trace.host_ops == good.host_ops
    assert trace.info.notes[-1] == (
        f"dropped {len(good.kernels)} events that cannot be placed or measured: dur is longer "
        f"than a day ({len(good.kernels)} events)"
    )
    assert trace.breakdown.median_step_ms == good.breakdown.median_step_ms


def test_every_duration_absurd_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as info:
        load_trace(_with_durations(tmp_path, 1e297))
    assert str(info.value).startswith(
        "t.json has no profiled range that can be read: dropped 33 events that cannot be "
        "placed or measured: dur is longer than a day (33 events)"
    )
