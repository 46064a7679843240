"""launch-bound: many tiny kernels that the GPU finishes before the next one is launched."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_traces import gpu_builder, recorded, write

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.launch_bound import launch_bound


def test_fires_on_recorded_a100_run_of_tiny_kernels() -> None:
    (finding,) = launch_bound(recorded("nccl/nccl_a100"))
    assert float(finding.evidence["tiny_kernels_per_step"]) > 300
    assert float(finding.evidence["starved_kernel_fraction"]) > 0.5
    named = finding.evidence["top_tiny_kernels"]
    assert named and all(k["launched_by"].startswith("aten::") for k in named[:2])
    assert "torch.compile" in finding.fix and "upper bound" in finding.saving_method
    assert 0 < (finding.saving_ms or 0) < float(finding.evidence["launch_gap_idle_ms_per_step"]) + 1


def test_silent_on_recorded_gpu_bound_resnet() -> None:
    # Its kernels queue up for milliseconds: the GPU is never waiting for a launch.
    assert launch_bound(recorded("loader_workers/resnet50_v100_num_workers_0")) == []
    assert launch_bound(recorded("ns_resolution/ns_resolution_v100_rank0")) == []


def test_cpu_trace_is_not_applicable() -> None:
    with pytest.raises(NotApplicable):
        launch_bound(recorded("cpu_only/gloo_rank34_of300"))


def test_synthetic_back_to_back_launches(tmp_path: Path) -> None:
    b = gpu_builder(8, 0, steps=3)
    for n in range(3):
        for i in range(200):  # a 3 us kernel every 40 us, each started as soon as launched
            ts = n * 10_000 + 50 + i * 40
            b.kernel(
                "void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>",
                ts,
                3,
                launched_at=ts - 7,
            )
    (finding,) = launch_bound(write(b, tmp_path, "synthetic_launch_bound"))
    assert finding.evidence["tiny_kernels_per_step"] == 200
    assert float(finding.evidence["launch_gap_idle_ms_per_step"]) == pytest.approx(
        199 * 37 / 1e3, rel=0.02
    )


def test_medians_are_the_middle_of_an_even_count(tmp_path: Path) -> None:
    # Kernels of 2 and 4 us in equal numbers: the median is 3 us. The rule once reported the
    # upper middle value (4 us) under the name "median".
    b = gpu_builder(8, 0, steps=3)
    for n in range(3):
        for i in range(200):
            ts = n * 10_000 + 50 + i * 40
            b.kernel("void add_kernel<float>", ts, 2 + 2 * (i % 2), launched_at=ts - 7)
    (finding,) = launch_bound(write(b, tmp_path, "synthetic_launch_bound_median"))
    assert finding.evidence["median_kernel_us"] == 3.0
    assert finding.evidence["top_tiny_kernels"][0]["median_us"] == 3.0
