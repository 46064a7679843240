"""Every vintage normalises into the same model: 2021 format, ns resolution, ROCm, CPU-only."""

from __future__ import annotations

from collections.abc import Callable

from torchpace.trace import Phase, Trace

Load = Callable[[str], Trace]


def test_torch_1_9_format(trace_fixture: Load) -> None:
    t = trace_fixture("loader_workers/resnet50_v100_num_workers_0")
    assert t.info.vintage.startswith("torch 1.9")
    assert t.info.device_kind == "cuda"
    assert t.info.device_name == "Tesla V100-DGXS-32GB"
    assert t.info.compute_capability == (7, 0)
    assert [s.index for s in t.steps] == [5, 6, 7, 8, 9, 10]
    assert len(t.kernels) == 8772
    # "stream 7" tids and lower-case "external id" still give streams and links.
    assert {k.stream for k in t.kernels} == {7}
    assert all(k.external_id is not None for k in t.kernels[:100])
    assert len(t.runtime_of_kind("sync")) == 13
    assert {(c.direction, c.src_kind, c.dst_kind) for c in t.copies} == {
        ("HtoD", "Pageable", "Device")
    }
    assert len(t.memory) == 12838
    assert t.info.rank is None and t.info.world_size is None


def test_current_format_with_distributed_info(trace_fixture: Load) -> None:
    t = trace_fixture("nccl/nccl_a100")
    assert t.info.vintage.startswith("torch >= 1.11")
    assert (t.info.rank, t.info.world_size, t.info.backend) == (0, 2, "nccl")
    assert t.breakdown.kernel_ms_by_class is not None
    assert t.breakdown.kernel_ms_by_class["communication"] > 0


def test_ns_resolution_keeps_microsecond_timestamps(trace_fixture: Load) -> None:
    t = trace_fixture("ns_resolution/ns_resolution_v100_rank0")
    assert t.info.timestamp_unit == "ns"
    # ts stays in microseconds with fractions: steps are tens of ms long, not tens of seconds.
    assert 20 < t.breakdown.median_step_ms < 500
    assert any(k.dur_us != int(k.dur_us) for k in t.kernels)


def test_rocm_trace(trace_fixture: Load) -> None:
    t = trace_fixture("rocm/mi250_minitoy_rocm6.2")
    assert t.info.device_kind == "rocm"
    assert len(t.kernels) == 14
    assert {r.kind for r in t.runtime if r.name.startswith("hipLaunch")} == {"launch"}
    assert [r.kind for r in t.runtime if r.name == "hipDeviceSynchronize"] == ["sync"]
    assert {c.direction for c in t.copies} == {"HtoD"}
    assert t.gpu_annotations and t.gpu_annotations[0].name.startswith(("Optimizer", "ProfilerStep"))


def test_cpu_only_trace(trace_fixture: Load) -> None:
    t = trace_fixture("cpu_only/gloo_rank34_of300")
    assert t.info.device_kind == "cpu"
    assert not t.has_gpu
    assert t.breakdown.gpu_busy_fraction is None
    assert (t.info.rank, t.info.world_size, t.info.backend) == (34, 300, "gloo")


def test_no_distributed_info(trace_fixture: Load) -> None:
    t = trace_fixture("no_distributed_info/no_distributed_info")
    assert t.info.rank is None and t.info.world_size is None and t.info.backend is None
    assert len(t.steps) == 1
    assert len(t.ops_named(["aten::item"])) == 5


def test_cpu_recorded_with_torch_2_13(trace_fixture: Load) -> None:
    t = trace_fixture("loader_workers/cpu_sleepy_loader")
    assert t.info.record_shapes is True and t.info.profile_memory is True
    assert t.has_stacks
    addmm = t.ops_named(["aten::addmm"])[0]
    assert addmm.shapes() is not None and [64, 64] in (addmm.shapes() or [])
    assert "float" in (addmm.types() or [])
    loc = t.user_frame(addmm)
    assert loc is not None and loc.file.endswith("record_cpu_loop.py") and loc.function == "main"


def test_pre_kineto_bare_list(trace_fixture: Load) -> None:
    """torch.autograd.profiler's file before Kineto: a bare JSON list of uncategorised ranges
    on "CPU functions" (before: refused, with advice to export_chrome_trace, the call that made
    it). Its host ops are read, the loop's iterations found, and a note says what is missing."""
    t = trace_fixture("pre_kineto/cpu_mlp_legacy_profiler")
    assert t.info.vintage.startswith("torch < 1.8 (pre-Kineto")
    assert len(t.host_ops) == 3005 and not t.has_gpu
    assert (t.info.step_source, len(t.steps)) == ("optimizer", 6)
    assert t.breakdown.phase_share(Phase.BACKWARD) > 0
    (note,) = [n for n in t.info.notes if n.startswith("a pre-Kineto trace")]
    assert "record with torch.profiler.profile(" in note
