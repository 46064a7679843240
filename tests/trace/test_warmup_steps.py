"""Warm-up and one-off phases: labelled on the leading steps, left out of the medians."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpace.trace import RuntimeCall, Step, Trace, load_trace
from torchpace.trace.labels import user_labels
from torchpace.trace.warmup import label_warmup

Load = Callable[[str], Trace]


def test_first_profiled_step_of_a_warming_loader_is_warm_up(trace_fixture: Load) -> None:
    """4 persistent workers start filling their queues during the first profiled step (30 ms,
    then 17 and 13 ms): that step is warm-up and the median is the steady one's."""
    t = trace_fixture("loader_workers/cpu_sleepy_loader_4_workers")
    first, *rest = t.breakdown.steps
    assert first.warmup.startswith("warm-up: 2.") and not first.outlier
    assert all(not s.warmup for s in rest)
    assert t.median_step_ms() == pytest.approx(sum(s.duration_ms for s in rest) / 2)


@pytest.mark.parametrize(
    "name",
    ["healthy/cpu_fast_loader", "ns_resolution/ns_resolution_v100_rank0", "nccl/nccl_a100"],
)
def test_steady_recorded_loops_have_no_warm_up(trace_fixture: Load, name: str) -> None:
    assert not any(s.warmup for s in trace_fixture(name).steps)


def _call(name: str, ts: float, kind: str = "other", dur: float = 1.0) -> RuntimeCall:
    return RuntimeCall(name, kind, ts, dur, 1, None, None)  # type: ignore[arg-type]


def test_a_window_holding_graph_capture_is_a_one_off_phase() -> None:
    calls = [_call("hipStreamBeginCapture", 10.0 * i) for i in range(3)]
    (window,) = label_warmup((Step(0, 0.0, 100.0),), calls)
    assert window.warmup == "one-off phase: CUDA graph capture (3 hipStreamBeginCapture)"


def test_autotuning_labels_the_step_even_when_later_ones_time_events() -> None:
    steps = tuple(Step(i, 100.0 * i, 100.0) for i in range(4))
    calls = [_call("cudaEventElapsedTime", 1.0 + i) for i in range(40)]
    calls += [_call("cudaEventElapsedTime", 150.0)]  # one timing call in the second step: logging
    labelled = label_warmup(steps, calls)
    assert "cuDNN autotuning (40 cudaEventElapsedTime" in labelled[0].warmup
    assert [bool(s.warmup) for s in labelled] == [True, False, False, False]


def test_two_steps_are_not_compared() -> None:
    """With one later step there is no median to compare with: durations label nothing."""
    steps = (Step(0, 0.0, 900.0), Step(1, 900.0, 100.0))
    assert label_warmup(steps, []) == steps


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(1.0, 1e6), min_size=1, max_size=20))
def test_labels_a_prefix_of_at_most_half_the_steps(durations: list[float]) -> None:
    steps, t = [], 0.0
    for i, dur in enumerate(durations):
        steps.append(Step(i, t, dur))
        t += dur
    labelled = label_warmup(tuple(steps), [])
    flags = [bool(s.warmup) for s in labelled]
    warm = flags.index(False) if False in flags else len(flags)
    assert not any(flags[warm:])  # a prefix
    assert warm <= max(1, len(steps) // 2) and (len(steps) >= 3 or warm == 0)
    assert [(s.index, s.ts_us, s.dur_us) for s in labelled] == [
        (s.index, s.ts_us, s.dur_us) for s in steps
    ]


VLLM = Path(__file__).parents[1] / "fixtures/corpus/tl_mi300_vllm_graph_capture.pt.trace.json.gz"


def test_vllm_graph_capture_is_a_one_off_phase_not_steady_state() -> None:
    """vLLM's piecewise CUDA-graph capture (MI300, no steps): the window is a one-off phase; the
    user's label `capture_8192_PIECEWISE` gets the device time of the work launched inside it
    (0.84 ms: the GPU is busy 0.5% of the window; its gpu_user_annotation spans 55 ms)."""
    t = load_trace(VLLM)
    assert t.info.step_source == "window" and t.warmup_only
    assert t.steps[0].warmup.startswith(
        "one-off phase: CUDA graph capture (25 hipStreamBeginCapture)"
    )
    labels = user_labels(t)
    assert labels is not None
    (row,) = labels.rows
    assert row.name == "capture_8192_PIECEWISE" and row.device_ms == pytest.approx(0.843, abs=0.01)


HOLDOUT = Path(__file__).parents[1] / "fixtures" / "holdout"


def test_first_step_opening_on_unrecorded_device_work_is_warm_up() -> None:
    """Kineto V100 ResNet-50 (held-out set): the profiler's window opens while the GPU still runs
    the previous step; the first pageable upload waits 36 ms for it with nothing recorded on the
    GPU. That idle start is where the window began, not a stall (the step is only 1.4x the
    others, under WARMUP_FACTOR)."""
    t = load_trace(HOLDOUT / "kineto_v100_resnet50_nw4_profiler_api.pt.trace.json.gz")
    first, *rest = t.steps
    assert (
        "profiler start (36." in first.warmup
        and "waiting on device work not recorded" in first.warmup
    )
    assert not any(s.warmup for s in rest)


def test_waiting_on_recorded_work_is_not_a_profiler_start() -> None:
    steps = tuple(Step(i, 100_000.0 * i, 100_000.0) for i in range(4))
    calls = [_call("cudaStreamSynchronize", 10.0, "sync", 5_000.0)]
    # the device was recording work before the wait: the wait is on recorded work
    assert label_warmup(steps, calls, first_device_us=0.0) == steps
    (first, *_) = label_warmup(steps, calls, first_device_us=6_000.0)
    assert (
        first.warmup == "one-off phase: profiler start (5.0 ms waiting on device work not recorded)"
    )


def test_a_lone_window_opening_on_unrecorded_work_is_still_judged() -> None:
    calls = [_call("cudaStreamSynchronize", 10.0, "sync", 5_000.0)]
    (window,) = label_warmup((Step(0, 0.0, 100_000.0),), calls, first_device_us=6_000.0)
    assert window.warmup == ""
