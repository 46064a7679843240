"""The HTML report's pictures, drawn from recorded traces: each renders, agrees with the breakdown
the rules read, and writes its numbers as text (so it reads without colour)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report import figures, units
from torchpace.report.html import render_html
from torchpace.report.html_figures import proof_name
from torchpace.trace import intervals as iv
from torchpace.trace import load_trace, load_traces
from torchpace.trace.summary import Phase

FIXTURES = Path(__file__).parents[1] / "fixtures" / "traces"
V100_MEMORY = FIXTURES / "large" / "transformer_v100_rank1of2_memory.json.gz"


@cache
def report(name: str) -> Diagnosis:
    path = FIXTURES / name
    traces = load_traces(path) if path.is_dir() else [load_trace(path)]
    return diagnose(traces, top=True)


def _lane_total(spans: list[tuple[float, float]]) -> float:
    return iv.total(iv.union(spans))


@pytest.mark.parametrize(
    "name",
    [
        "loader_workers/resnet50_v100_num_workers_0.json.gz",
        "loader_workers/cpu_sleepy_loader.json.gz",
        "host_sync/event_sync_item.json.gz",
    ],
)
def test_timeline_host_lane_is_the_breakdowns_phases(name: str) -> None:
    d = report(name)
    assert d.pictures is not None and d.pictures.steps
    by_index = {s.index: s for s in d.breakdown.steps}
    for step in d.pictures.steps:
        host = step.lanes[0]
        for phase, ms in by_index[step.index].phase_ms.items():
            if phase is Phase.OTHER:
                continue  # left blank on the lane
            drawn = _lane_total([(s.start_ms, s.end_ms) for s in host.spans if s.label == phase])
            assert drawn == pytest.approx(ms, rel=0.05, abs=0.1), (step.index, phase)


def test_timeline_device_lanes_show_the_busy_time_and_marks_the_stalls() -> None:
    d = report("loader_workers/resnet50_v100_num_workers_0.json.gz")
    assert d.pictures is not None
    by_index = {s.index: s for s in d.breakdown.steps}
    for step in d.pictures.steps:
        device = [(s.start_ms, s.end_ms) for ln in step.lanes[1:] for s in ln.spans]
        assert _lane_total(device) == pytest.approx(by_index[step.index].gpu_busy_ms, rel=0.1)
        data = sum(m.end_ms - m.start_ms for m in step.marks if m.label == "dataloader")
        # the DataLoader stall this trace records: about 70 ms of a ~200 ms step
        assert data == pytest.approx(by_index[step.index].phase_ms[Phase.DATALOADER], rel=0.02)
        assert any(m.label == "sync" for m in step.marks)
    picture = figures.timeline_svg(d.pictures.steps)
    assert picture is not None and "GPU stream" in picture and "host waits" in picture
    for step in d.pictures.steps:
        assert f"step {step.index}: {units.ms(step.duration_ms)}" in picture


def test_idle_by_cause_labels_carry_the_split() -> None:
    d = report("large/transformer_v100_rank1of2_memory.json.gz")
    assert d.pictures is not None and d.pictures.idle_ms_by_cause is not None
    split = d.pictures.idle_ms_by_cause
    picture = figures.idle_svg(split, d.breakdown.median_step_ms)
    assert picture is not None
    idle = sum(split.values())
    top = max(split, key=split.__getitem__)
    assert top == "host_compute"  # the gpu-idle finding's top cause on this trace
    assert f"{units.ms(split[top])}, {units.share(split[top] / idle)} of the idle time" in picture
    assert proof_name(d) == "idle"  # gpu-idle leads: its picture comes first
    page = render_html(d)
    assert page.index("id='proof'") < page.index("id='findings'") < page.index("id='gpu'")


def test_memory_curve_reserved_over_allocated() -> None:
    d = report("large/transformer_v100_rank1of2_memory.json.gz")
    curve = d.pictures.memory if d.pictures is not None else None
    assert curve is not None and curve.device == "GPU" and curve.reserved_mb is not None
    assert all(r >= a for a, r in zip(curve.allocated_mb, curve.reserved_mb, strict=True))
    # the memory-pressure finding's figures: 6.17 GiB peak allocated, 11.9 GiB reserved
    assert max(curve.allocated_mb) / 1024 == pytest.approx(6.17, abs=0.01)
    picture = figures.memory_svg(curve)
    assert picture is not None and "allocated, peak 6.17 GiB" in picture
    assert "reserved, peak 11.90 GiB" in picture


def test_cpu_memory_curve_has_no_reserve() -> None:
    curve = report("healthy/cpu_fast_loader.json.gz").pictures.memory  # type: ignore[union-attr]
    assert curve is not None and curve.device == "CPU" and curve.reserved_mb is None
    picture = figures.memory_svg(curve)
    assert picture is not None and "reserved" not in picture


def test_rank_bars_name_the_straggler_with_its_work() -> None:
    d = report("ddp_gloo_2rank/straggler_data")
    picture = figures.ranks_svg(d.ranks, d.slowest_rank)
    assert picture is not None and "rank 1 (slowest)" in picture
    for view in d.ranks:
        assert view.work is not None
        assert (
            f"work {units.ms(view.work.work_ms)} + waiting {units.ms(view.work.wait_ms)}" in picture
        )
    assert proof_name(d) == "ranks"


def test_top_bars_carry_each_rows_time_and_share() -> None:
    d = report("loader_workers/resnet50_v100_num_workers_0.json.gz")
    assert d.top is not None
    for rows in (d.top.kernels, d.top.ops):
        picture = figures.top_svg(rows, "x", "t")
        assert picture is not None
        for r in rows:
            assert f"{units.ms(r.total_ms)}, {units.share(r.share)}" in picture


def test_pictures_only_when_asked_for() -> None:
    trace = load_trace(FIXTURES / "host_sync" / "event_sync_item.json.gz")
    assert diagnose(trace).pictures is None  # the JSON/text path pays nothing
