"""Edge cases through the real loader, on synthetic_* traces: no steps, overlaps, odd categories."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpace.trace import Phase, load_trace, load_traces
from torchpace.trace.synthetic import TraceBuilder

DATA = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def test_synthetic_no_steps_is_one_window(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.op("aten::mm", 100, 50)
    b.op("aten::add", 400, 100)
    t = load_trace(b.write(tmp_path / "synthetic_no_steps.json"))
    assert t.info.step_source == "window"
    assert [(s.ts_us, s.dur_us) for s in t.steps] == [(100, 400)]
    assert t.breakdown.median_step_ms == pytest.approx(0.4)


def test_synthetic_overlapping_phases_follow_precedence(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op(DATA, 0, 200, cat="user_annotation")
    b.op("## forward ##", 150, 350, cat="user_annotation")  # overlaps the data range by 50
    b.op("Optimizer.zero_grad#SGD.zero_grad", 480, 40, cat="user_annotation")
    b.op("autograd::engine::evaluate_function: MmBackward0", 520, 300, tid=7)
    b.op("Optimizer.step#SGD.step", 800, 150, cat="user_annotation")  # inside backward's tail
    t = load_trace(b.write(tmp_path / "synthetic_overlap.json.gz"))
    (step,) = t.breakdown.steps
    ms = {p: round(v * 1000) for p, v in step.phase_ms.items()}  # in us
    assert ms == {
        Phase.DATALOADER: 200,
        Phase.H2D: 0,
        Phase.SYNC: 0,
        Phase.FORWARD: 280,  # 200..500 minus zero_grad 480..500
        Phase.BACKWARD: 280,  # 520..820 minus optimizer 800..820
        Phase.OPTIMIZER: 190,  # 480..520 and 800..950
        Phase.OTHER: 50,
    }


def test_synthetic_h2d_copy_counts_as_h2d(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 1000)
    b.op("aten::to", 100, 100)
    b.op("aten::_to_copy", 105, 90)
    b.op("aten::copy_", 110, 80)
    b.memcpy("HtoD", "Pageable", "Device", 130, 50, 4096, issued_at=120)
    b.op("aten::mm", 300, 50)
    b.kernel("volta_sgemm_128x64_nn", 360, 100, launched_at=310)
    t = load_trace(b.write(tmp_path / "synthetic_h2d.json"))
    (step,) = t.breakdown.steps
    assert step.phase_ms[Phase.H2D] == pytest.approx(0.1)
    assert step.gpu_busy_ms == pytest.approx(0.15)
    assert step.kernel_ms_by_class is not None and step.kernel_ms_by_class["gemm"] == pytest.approx(
        0.1
    )
    (copy,) = t.copies
    launcher = t.launcher(copy)
    assert launcher is not None and launcher.name == "aten::copy_"
    assert t.top_op(launcher).name == "aten::to"


def test_synthetic_wait_inside_a_copy_is_sync_not_h2d(tmp_path: Path) -> None:
    """A blocking .to(device) first waits for the queue ahead of it: that wait is not copying."""
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 20)
    b.kernel("volta_sgemm_128x64_nn", 40, 500, launched_at=15)
    b.op("aten::to", 100, 500)
    b.op("aten::copy_", 105, 490)
    b.memcpy("HtoD", "Pageable", "Device", 545, 10, 4096, issued_at=110)
    b.runtime("cudaStreamSynchronize", 120, 440)  # the GPU runs the gemm until 540
    (step,) = load_trace(b.write(tmp_path / "synthetic_h2d_wait.json")).breakdown.steps
    assert step.phase_ms[Phase.SYNC] == pytest.approx(0.44)
    assert step.phase_ms[Phase.H2D] == pytest.approx(0.06)
    assert sum(step.phase_ms.values()) == pytest.approx(1.0)


def test_synthetic_unknown_categories_are_ignored_and_noted(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.op("aten::mm", 0, 10)
    b.raw({"ph": "X", "cat": "mtia_runtime", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 1})
    t = load_trace(b.write(tmp_path / "synthetic_unknown.json"))
    assert "ignored events of unknown categories: mtia_runtime (1)" in t.info.notes
    assert [o.name for o in t.host_ops] == ["aten::mm"]


def test_synthetic_outlier_step_is_labelled_and_left_out(tmp_path: Path) -> None:
    b = TraceBuilder()
    for n, dur in enumerate([100, 110, 105, 400, 100]):
        b.step(n, n * 1000, dur)
    t = load_trace(b.write(tmp_path / "synthetic_outlier.json"))
    labels = [s.outlier for s in t.breakdown.steps]
    assert labels[3].startswith("3.8x the median step") and labels.count("") == 4
    assert t.breakdown.median_step_ms == pytest.approx(0.1025)
    assert [s.index for s in t.typical_steps] == [0, 1, 2, 4]


def test_synthetic_directory_sorted_by_rank(tmp_path: Path) -> None:
    for rank in (2, 0, 1):
        b = TraceBuilder()
        b.top["distributedInfo"] = {"rank": rank, "world_size": 3, "backend": "nccl"}
        b.op("aten::mm", 0, 10 + rank)
        b.write(tmp_path / f"worker{rank}_synthetic.pt.trace.json")
    assert [t.info.rank for t in load_traces(tmp_path)] == [0, 1, 2]
    assert len(load_traces(tmp_path / "worker1_synthetic.pt.trace.json")) == 1


def test_synthetic_rank_from_file_name(tmp_path: Path) -> None:
    for rank in (10, 9):
        b = TraceBuilder()
        b.op("aten::mm", 0, 10)
        b.write(tmp_path / f"synthetic_rank-{rank}.json.gz")
    names = [Path(t.info.path).name for t in load_traces(tmp_path)]
    assert names == ["synthetic_rank-9.json.gz", "synthetic_rank-10.json.gz"]


def test_synthetic_string_and_float_ids_are_normalised(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.raw({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": "7", "tid": "7", "ts": 0, "dur": 10,
           "args": {"External id": "0x10"}})  # fmt: skip
    b.raw({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": "stream 9", "ts": 2, "dur": 3,
           "args": {"correlation": 5.0, "External id": 16.0, "device": "0"}})  # fmt: skip
    t = load_trace(b.write(tmp_path / "synthetic_odd_ids.json"))
    (op,) = t.host_ops
    (kernel,) = t.kernels
    assert (op.pid, op.tid, op.external_id) == (7, 7, 16)
    assert (kernel.stream, kernel.correlation, kernel.external_id, kernel.device) == (9, 5, 16, 0)


def test_synthetic_long_steps_waiting_for_data_are_not_outliers(tmp_path: Path) -> None:
    """A loader that cannot keep up stalls again and again: those steps are the steady state.
    A long step spent elsewhere (a checkpoint) stays an outlier."""
    b = TraceBuilder()
    ts = 0
    for n, (dur, wait) in enumerate(
        [(100, 1), (400, 300), (100, 1), (400, 300), (100, 1), (900, 1)]
    ):
        b.step(n, ts, dur)
        b.op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", ts + 1, wait)
        ts += dur
    t = load_trace(b.write(tmp_path / "synthetic_loader_stalls.json"))
    assert [bool(s.outlier) for s in t.breakdown.steps] == [False] * 5 + [True]
    # time-weighted: 602 of the 1100 us of the 5 typical steps wait for data, not the median's 1%
    assert t.median_step_fraction("dataloader") == pytest.approx(602 / 1100, rel=0.01)
