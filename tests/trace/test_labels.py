"""The user's own record_function labels: a tree, medians per step, host and device time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.trace import Trace, load_trace
from torchpace.trace.labels import is_user_label, launched_device_us, user_labels
from torchpace.trace.stats import median
from torchpace.trace.synthetic import TraceBuilder

Load = Callable[[str], Trace]
LABELLED = "user_labels/cpu_transformer_labels"


def test_recorded_labels_form_the_tree_the_script_wrote(trace_fixture: Load) -> None:
    labels = user_labels(trace_fixture(LABELLED))
    assert labels is not None and labels.steps == 4 and labels.device_method == ""
    tree = [(row.depth, row.name) for row in labels.rows]
    assert tree[:2] == [(0, "backward_pass"), (0, "forward_pass")]  # largest host time first
    assert set(tree[2:4]) == {
        (1, "transformer_layer:self_attention"),
        (1, "transformer_layer:feed_forward"),
    }
    assert {name for _, name in tree[4:]} == {"optimizer_step", "loss", "log_metrics"}
    by_name = {row.name: row for row in labels.rows}
    assert by_name["transformer_layer:self_attention"].calls == 2  # one per layer
    assert by_name["transformer_layer:feed_forward"].path == (
        "forward_pass",
        "transformer_layer:feed_forward",
    )
    assert (by_name["log_metrics"].calls, by_name["log_metrics"].steps_seen) == (0.5, 2)
    assert all(row.device_ms is None for row in labels.rows)  # a CPU trace


def test_torch_markers_are_not_the_users(trace_fixture: Load) -> None:
    labels = user_labels(trace_fixture(LABELLED))
    assert labels is not None
    names = {row.name for row in labels.rows}
    assert not any(
        n.startswith(("ProfilerStep#", "enumerate(DataLoader)", "Optimizer.")) for n in names
    )
    for name in (
        "## forward ##",
        "nccl:all_reduce",
        "gloo:broadcast",
        "DistributedDataParallel.forward",
        "DataParallel.forward",
        # torch.compile's own timing ranges, seen under the doctor on a compiled model
        "dynamo_data: compile_id=0/4",
        "backend_compile_data: fn_name=OutputGraph.call_user_compiler, compile_id=0/5",
    ):
        assert not is_user_label(name)
    assert is_user_label("capture_8192_PIECEWISE") and is_user_label("[param|clear_cache]")


def test_host_time_is_the_median_of_per_step_sums(trace_fixture: Load) -> None:
    t = trace_fixture(LABELLED)
    labels = user_labels(t)
    assert labels is not None
    for row in labels.rows:
        if row.depth:
            continue
        per_step = [
            sum(o.dur_us for o in t.ops_named([row.name]) if s.ts_us <= o.ts_us <= s.end_us)
            for s in t.typical_steps
        ]
        assert row.host_ms == pytest.approx(median(per_step) / 1e3)
    parent = next(r for r in labels.rows if r.name == "forward_pass")
    children = [r for r in labels.rows if r.path[:-1] == parent.path]
    assert sum(r.host_ms for r in children) < parent.host_ms  # nested time is inside its parent


def test_traces_without_user_labels_have_none(trace_fixture: Load) -> None:
    assert user_labels(trace_fixture("healthy/cpu_fast_loader")) is None  # only torch's markers
    assert user_labels(trace_fixture("nccl/nccl_a100")) is None  # `## forward ##`, nccl:*


def test_labels_of_a_gpu_benchmark_without_kernels(trace_fixture: Load) -> None:
    """PARAM's AlexNet benchmark labels its phases `[param|...]`; no device activity recorded."""
    labels = user_labels(trace_fixture("cupti_alloc_benchmark/benchmark_cupti_alloc"))
    assert labels is not None and labels.device_method == ""
    top = labels.rows[0]
    assert top.name == "[param|cuda]" and top.depth == 0
    assert {r.name for r in labels.rows if r.depth == 2} >= {
        "[param|pytorch.model.alex_net|0|0|0|warmup|forward]",
        "[param|pytorch.model.alex_net|0|0|0|measure|forward]",
    }


def _gpu_labels(tmp_path: Path, *, annotate: bool) -> Trace:
    """synthetic: `outer` holds `inner`; kernels launched in each; optionally a gpu annotation."""
    b = TraceBuilder()
    b.gpu_device()
    for n in range(3):
        t0 = n * 1000.0
        b.step(n, t0, 1000)
        outer = b.op("outer", t0 + 10, 500, cat="user_annotation")
        b.op("inner", t0 + 100, 200, cat="user_annotation")
        b.kernel("k_outer", t0 + 60, 30, launched_at=t0 + 50)
        b.kernel("k_inner", t0 + 160, 70, launched_at=t0 + 150)
        b.kernel("k_after", t0 + 700, 90, launched_at=t0 + 650)  # outside both labels
        if annotate:
            b.raw({
                "ph": "X", "cat": "gpu_user_annotation", "name": "outer", "pid": 0, "tid": 7,
                "ts": t0 + 60, "dur": 170, "args": {"External id": outer},
            })  # fmt: skip
    return load_trace(b.write(tmp_path / f"synthetic_labels_{annotate}.json"))


def test_synthetic_device_time_from_launched_kernels(tmp_path: Path) -> None:
    labels = user_labels(_gpu_labels(tmp_path, annotate=False))
    assert labels is not None and labels.device_method
    by_name = {row.name: row for row in labels.rows}
    assert by_name["outer"].device_ms == pytest.approx(0.1)  # 30 + 70 us: nested included
    assert by_name["inner"].device_ms == pytest.approx(0.07)
    assert by_name["outer"].host_ms == pytest.approx(0.5)


def test_synthetic_gpu_annotation_is_not_the_device_time(tmp_path: Path) -> None:
    """The profiler's GPU-side range spans first to last kernel (gaps included): the label's
    device time is its kernels' time."""
    labels = user_labels(_gpu_labels(tmp_path, annotate=True))
    assert labels is not None
    by_name = {row.name: row for row in labels.rows}
    assert by_name["outer"].device_ms == pytest.approx(0.1)  # not the annotation's 0.17 ms span
    assert by_name["inner"].device_ms == pytest.approx(0.07)


def test_backward_label_counts_the_autograd_threads_kernels(trace_fixture: Load) -> None:
    """V100, HTA's ns_resolution trace: `## backward ##` on the main thread encloses ~744 kernels
    launched from the autograd thread; Kineto's GPU-side range for it holds only the main
    thread's few (0.03 ms). Attributed by their launching calls' time, they are ~63 ms."""
    t = trace_fixture("ns_resolution/ns_resolution_v100_rank0")
    ranges = t.ops_named(["## backward ##"])
    assert len(ranges) == 5 and {o.tid for o in ranges} == {t.main_tid}
    spans = [g.dur_us for g in t.gpu_annotations if g.name == "## backward ##"]
    assert max(spans) < 100  # the profiler's own range: under 0.1 ms
    for us in launched_device_us(t, ranges):
        assert 55_000 < us < 70_000  # ~63 ms of backward kernels per step
