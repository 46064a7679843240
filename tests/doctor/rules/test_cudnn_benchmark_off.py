"""cudnn-benchmark-off: GPU conv nets with fixed shapes only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.cudnn_benchmark_off import cudnn_benchmark_off
from torchpace.runner.sensors.inspection import Inspection

GPU = Inspection(device_kind="cuda", conv_layers=20, cudnn_benchmark=False, steps_inspected=2)


def test_fixed_shapes_with_benchmark_off_are_flagged() -> None:
    (f,) = cudnn_benchmark_off(replace(GPU, input_shapes_static=True))
    assert f.fix.startswith("torch.backends.cudnn.benchmark = True")
    assert f.evidence["conv_count"] == 20


def test_silent_when_on_when_shapes_vary_or_without_convs() -> None:
    assert cudnn_benchmark_off(replace(GPU, cudnn_benchmark=True)) == []
    assert cudnn_benchmark_off(replace(GPU, input_shapes_static=False)) == []
    assert cudnn_benchmark_off(replace(GPU, conv_layers=0)) == []


def test_unknown_shapes_carry_a_caveat() -> None:
    (f,) = cudnn_benchmark_off(GPU)
    assert "shapes" in f.caveat


def test_cpu_runs_are_not_applicable() -> None:
    with pytest.raises(NotApplicable, match="only used on a GPU"):
        cudnn_benchmark_off(Inspection(device_kind="cpu", conv_layers=3, cudnn_benchmark=False))
