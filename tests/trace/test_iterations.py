"""Iterations inferred from the loop's markers when a trace has no ProfilerStep# ranges."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpace.trace import HostOp, Trace, load_trace
from torchpace.trace.iterations import infer
from torchpace.trace.summary import Phase

Load = Callable[[str], Trace]
R50 = (
    Path(__file__).parents[1] / "fixtures/corpus/kineto_v100_resnet50_autograd_nw4.pt.trace.json.gz"
)
NEXT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
STEP, ZERO = "Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad"


@pytest.fixture(scope="module")
def r50() -> Trace:
    return load_trace(R50)


def test_resnet50_iterations_from_the_dataloader(r50: Trace) -> None:
    """V100 ResNet-50 without ProfilerStep: 6 iterations, the first a 5 s warm-up."""
    assert r50.info.step_source == "dataloader"
    assert "6 iterations inferred" in r50.info.step_detail
    assert len(r50.steps) == 6
    first, *steady = r50.steps
    assert first.dur_us > 4e6 and "warm-up" in first.warmup and "cuDNN autotuning" in first.warmup
    assert all(not s.warmup for s in steady)
    assert all(100e3 < s.dur_us < 130e3 for s in steady)  # ~114 ms each (PROVENANCE.md)


def test_resnet50_steady_state_is_judged(r50: Trace) -> None:
    b = r50.breakdown
    assert 100 < b.median_step_ms < 130
    assert b.gpu_busy_fraction is not None and 0.84 < b.gpu_busy_fraction < 0.92
    assert r50.median_step_fraction("dataloader") < 0.03
    assert [s.index for s in r50.typical_steps] == [1, 2, 3, 4, 5]
    assert not r50.warmup_only


def test_recorded_cpu_loop_without_profiler_steps(trace_fixture: Load) -> None:
    """The labelled transformer loop profiled whole, no prof.step(): its 6 batches."""
    t = trace_fixture("user_labels/cpu_transformer_no_steps")
    assert (t.info.step_source, len(t.steps)) == ("dataloader", 6)
    nexts = t.ops_matching(r"enumerate\(DataLoader\)")
    assert [s.ts_us for s in t.steps] == [o.ts_us for o in nexts]
    (last_step,) = t.ops_named(["Optimizer.step#AdamW.step"])[-1:]
    assert t.steps[-1].end_us == pytest.approx(last_step.end_us)


def _op(name: str, ts: float, dur: float, tid: int = 1) -> HostOp:
    return HostOp(name, "annotation", ts, dur, 1, tid, None)


def _loop(
    durations: list[float], batches: int, stray_zero_grad: bool, last_next: bool
) -> list[HostOp]:
    """A loop: `batches` DataLoader batches, then zero_grad and step, per iteration."""
    ops, t = [], 0.0
    if stray_zero_grad:
        ops.append(_op(ZERO, t, 1))
        t += 5
    for dur in durations:
        part = dur / (batches + 2)
        for _ in range(batches):
            ops.append(_op(NEXT, t, part / 2))
            ops.append(_op("aten::mm", t + part / 2, part / 3))
            t += part
        ops.append(_op(ZERO, t, part / 2))
        ops.append(_op(STEP, t + part, part / 2))
        t += 2 * part
    if last_next:
        ops.append(_op(NEXT, t, 1))
    return sorted(ops, key=lambda o: o.ts_us)


@settings(max_examples=60, deadline=None)
@given(
    durations=st.lists(st.floats(10, 1e5), min_size=2, max_size=12),
    batches=st.integers(1, 4),
    stray=st.booleans(),
    last_next=st.booleans(),
)
def test_inferred_iterations_partition_the_loop(
    durations: list[float], batches: int, stray: bool, last_next: bool
) -> None:
    ops = _loop(durations, batches, stray, last_next)
    found = infer(ops, main_tid=1)
    assert found is not None
    steps = found.steps
    assert len(steps) == len(durations)  # one per optimizer cycle, whatever the batch count
    for a, b in pairwise(steps):
        assert a.end_us == pytest.approx(b.ts_us)  # contiguous: no gap, no overlap
    for step, dur in zip(steps[:-1], durations[:-1], strict=True):
        assert step.dur_us == pytest.approx(dur, rel=1e-6)
    steps_ops = [o for o in ops if o.name == STEP]
    assert steps[-1].end_us == pytest.approx(steps_ops[-1].end_us)
    assert steps[0].ts_us == pytest.approx(next(o.ts_us for o in ops if o.name == NEXT))


def test_gradient_accumulation_iterates_per_optimizer_step() -> None:
    found = infer(
        _loop([100.0, 100.0, 100.0], batches=4, stray_zero_grad=False, last_next=False), 1
    )
    assert found is not None and found.source == "optimizer" and len(found.steps) == 3
    assert "Optimizer.step#SGD.step" in found.detail


def test_batches_without_an_optimizer_leave_the_last_one_out() -> None:
    """Inference loop: nothing marks where the last batch's iteration ends."""
    ops = [_op(NEXT, 100.0 * i, 10) for i in range(5)]
    found = infer(ops, 1)
    assert found is not None and found.source == "dataloader"
    assert [s.ts_us for s in found.steps] == [0.0, 100.0, 200.0, 300.0]


ROOT = "autograd::engine::evaluate_function: MseLossBackward0"


def _backward_loop(layers: list[str]) -> list[HostOp]:
    """Forward (on thread 1) then backward (autograd thread 2) through one layer per pass."""
    ops = []
    for i, layer in enumerate(layers):
        ops.append(HostOp(f"aten::{layer.lower()}", "op", 100.0 * i, 40, 1, 1, None))
        ops.append(HostOp(ROOT, "op", 100.0 * i + 50, 5, 1, 2, None))
        node = f"autograd::engine::evaluate_function: {layer}Backward0"
        ops.append(HostOp(node, "op", 100.0 * i + 56, 20, 1, 2, None))
    return ops


def test_backward_passes_delimit_hand_written_loops() -> None:
    """Each iteration ends with its backward pass and holds the forward before it."""
    found = infer(_backward_loop(["Addmm"] * 4), 1)
    assert found is not None and found.source == "backward"
    assert [(s.ts_us, s.end_us) for s in found.steps] == [
        (0.0, 76.0), (76.0, 176.0), (176.0, 276.0), (276.0, 376.0),
    ]  # fmt: skip


def test_backward_passes_through_different_layers_are_no_iterations() -> None:
    """A harness running forward and backward once through each of several layers repeats its
    loss's root node, not an iteration."""
    assert (
        infer(_backward_loop(["Addmm", "Convolution", "NativeLayerNorm", "Embedding"]), 1) is None
    )


def test_no_repeating_marker_gives_none() -> None:
    assert infer([HostOp("aten::mm", "op", 0, 10, 1, 1, None)], 1) is None


def test_an_evaluation_loop_after_training_does_not_delimit_iterations() -> None:
    """Two validation batches (another loader) repeat least often but hold no optimizer step."""
    ops = _loop([100.0] * 5, batches=1, stray_zero_grad=False, last_next=False)
    end = ops[-1].end_us
    val = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    ops += [_op(val, end + 10, 5), _op(val, end + 30, 5)]
    found = infer(ops, 1)
    assert found is not None and found.source == "dataloader" and len(found.steps) == 5
    assert NEXT in found.detail


def test_recorded_backward_loop_keeps_each_forward_in_its_iteration(trace_fixture: Load) -> None:
    """MI300X (TraceLens): forward through 10 labelled norm layers, MSE, backward, 3 times. Each
    iteration ends with its backward pass, so its forward (~2.4 ms of the ~3 ms steady step) is
    forward, not 'other' (before: 2 iterations starting at the backward roots, forward 0)."""
    t = trace_fixture("backward_steps/normalization_layers_mi300x")
    assert (t.info.step_source, len(t.steps)) == ("backward", 3)
    assert "warm-up" in t.steps[0].warmup
    for s in t.breakdown.steps[1:]:
        assert s.phase_ms[Phase.FORWARD] > 0.6 * s.duration_ms
        assert s.phase_ms[Phase.OTHER] < 0.05 * s.duration_ms
    labels = t.ops_named(["BatchNorm affine=True"])
    assert [t.step_at(o.ts_us).index for o in labels] == [0, 1, 2]  # type: ignore[union-attr]


def test_recorded_hand_written_sgd_loop(trace_fixture: Load) -> None:
    """CPU MLP with a hand-written update: 24 backward passes give 24 iterations, and the
    forward is about half of each (before: in 'other')."""
    t = trace_fixture("backward_steps/cpu_manual_sgd")
    assert (t.info.step_source, len(t.steps)) == ("backward", 24)
    assert 0.35 < t.median_step_fraction(Phase.FORWARD) < 0.7
    assert t.median_step_fraction(Phase.OTHER) < 0.05


def test_recorded_layer_harness_has_no_iterations(trace_fixture: Load) -> None:
    """Forward and backward once through each of 10 different layers, a loss each: the same
    root node 10 times, different work every time: one window, not iterations (before: 9)."""
    t = trace_fixture("backward_steps/cpu_layer_harness")
    roots = t.ops_named(["autograd::engine::evaluate_function: MseLossBackward0"])
    assert len(roots) == 10
    assert (t.info.step_source, len(t.steps)) == ("window", 1)
    # Ten backward passes with forwards between: 23.6 of the window's 196 ms are backward (the
    # backward ops take 22.6 ms); one span from the first backward op to the last read 180 ms.
    phases, step = t.breakdown.median_phase_ms, t.breakdown.median_step_ms
    assert phases[Phase.BACKWARD] < 0.2 * step < phases[Phase.FORWARD]
