"""gpu-idle: the GPU idles a large share of the step, with the idle time split by cause."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.gpu_idle import gpu_idle
from torchpace.trace import Trace, load_trace
from torchpace.trace.synthetic import TraceBuilder

Load = Callable[[str], Trace]
DATA = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def test_resnet_idle_is_mostly_waiting_for_data(trace_fixture: Load) -> None:
    (f,) = gpu_idle(trace_fixture("loader_workers/resnet50_v100_num_workers_0"))
    assert 0.3 < f.evidence["idle_fraction"] < 0.6  # type: ignore[operator]
    causes = f.evidence["idle_ms_by_cause"]
    assert isinstance(causes, dict)
    assert f.evidence["top_cause_name"] == "data"
    assert causes["data_ms"] > 0.5 * f.evidence["idle_ms_per_step"]  # type: ignore[operator]
    assert sum(causes.values()) == pytest.approx(f.evidence["idle_ms_per_step"], rel=1e-3)  # type: ignore[arg-type]


def test_busy_gpu_is_silent(trace_fixture: Load) -> None:
    assert gpu_idle(trace_fixture("ns_resolution/ns_resolution_v100_rank0")) == []


def test_cpu_trace_is_not_applicable(trace_fixture: Load) -> None:
    with pytest.raises(NotApplicable, match="no device activity"):
        gpu_idle(trace_fixture("cpu_only/gloo_rank34_of300"))


def test_synthetic_idle_causes(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 10_000)
    b.op(DATA, 0, 4_000, cat="user_annotation")  # idle 0..4000: data
    b.op("aten::mm", 4_000, 100)
    b.kernel("volta_sgemm_128x64_nn", 4_050, 1_000, launched_at=4_010)
    for i in range(10):  # tiny kernels 5 us apart: launch-bound
        b.kernel("vectorized_elementwise_kernel", 5_100 + i * 10, 5, launched_at=5_000 + i * 10)
    b.op("aten::index", 5_300, 3_000)  # host compute 5300..8300 while the GPU idles
    b.kernel("vectorized_elementwise_kernel", 8_400, 1_600, launched_at=8_310)
    (f,) = gpu_idle(load_trace(b.write(tmp_path / "synthetic_idle.json")))
    causes = f.evidence["idle_ms_by_cause"]
    assert isinstance(causes, dict)
    assert causes["data_ms"] == pytest.approx(4.0, abs=0.06)
    assert causes["launch_overhead_ms"] == pytest.approx(0.045, abs=0.002)  # nine 5 us gaps
    assert causes["host_compute_ms"] == pytest.approx(3.0, abs=0.06)
    # 4100..5000 (no host op) minus the first kernel, 5195..5300 and 8300..8400: host between ops.
    assert causes["other_ms"] == pytest.approx(0.05 + 0.105 + 0.1, abs=0.01)
    assert f.evidence["top_cause_name"] == "data"


def test_synthetic_driver_start_up_and_allocator_are_not_data(tmp_path: Path) -> None:
    """Lazy context creation inside the first batch's pin/copy is start-up, not data loading."""
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 100_000)
    b.op(DATA, 0, 60_000, cat="user_annotation")
    b.runtime("cudaStreamCreateWithFlags", 1_000, 40_000)  # the context is created here
    b.runtime("cudaFree", 61_000, 20_000)  # the host waits in the allocator
    b.kernel("volta_sgemm_128x64_nn", 82_000, 18_000, launched_at=81_500)
    (f,) = gpu_idle(load_trace(b.write(tmp_path / "synthetic_idle_init.json")))
    causes = f.evidence["idle_ms_by_cause"]
    assert isinstance(causes, dict)
    assert causes["context_init_ms"] == pytest.approx(40.0, abs=0.1)
    assert causes["allocator_ms"] == pytest.approx(20.0, abs=0.1)
    assert causes["data_ms"] == pytest.approx(20.0, abs=0.1)  # the rest of the DataLoader range
    assert f.evidence["top_cause_name"] == "context_init"
    assert "torch.cuda.init()" in f.fix
    assert f.saving_ms == pytest.approx(2.0, abs=0.1)  # start-up, allocator, data: not its saving


def test_kernels_without_durations_are_not_judged_idle(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.gpu_device()
    b.step(1, 0, 10_000)
    b.op("aten::mm", 100, 9_000)
    b.kernel("volta_sgemm_128x64_nn", 200, 0)  # a writer that records no device durations
    with pytest.raises(NotApplicable, match="GPU busy time cannot be measured"):
        gpu_idle(load_trace(b.write(tmp_path / "synthetic_zero_kernels.json")))
