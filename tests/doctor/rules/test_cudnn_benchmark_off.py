"""cudnn-benchmark-off: GPU conv nets with fixed shapes only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.cudnn_benchmark_off import cudnn_benchmark_off
from torchpace.runner.sensors.flags import FlagsRecord
from torchpace.runner.sensors.host import DeviceRecord
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.model import ModelRecord

GPU = Inspection(
    device=DeviceRecord(kind="cuda"),
    flags=FlagsRecord(cudnn_benchmark=False),
    model=ModelRecord(conv_layers=20, steps=2),
)


def _gpu(**model: object) -> Inspection:
    return replace(GPU, model=replace(GPU.model, **model))


def test_fixed_shapes_with_benchmark_off_are_flagged() -> None:
    (f,) = cudnn_benchmark_off(_gpu(input_shapes_static=True))
    assert f.fix.startswith("torch.backends.cudnn.benchmark = True")
    assert f.evidence["conv_count"] == 20


def test_silent_when_on_when_shapes_vary_or_without_convs() -> None:
    assert cudnn_benchmark_off(replace(GPU, flags=FlagsRecord(cudnn_benchmark=True))) == []
    assert cudnn_benchmark_off(_gpu(input_shapes_static=False)) == []
    assert cudnn_benchmark_off(_gpu(conv_layers=0)) == []


def test_unknown_shapes_carry_a_caveat() -> None:
    (f,) = cudnn_benchmark_off(GPU)
    assert "shapes" in f.caveat


def test_cpu_runs_are_not_applicable() -> None:
    with pytest.raises(NotApplicable, match="only used on a GPU"):
        cudnn_benchmark_off(
            Inspection(
                device=DeviceRecord(kind="cpu"),
                flags=FlagsRecord(cudnn_benchmark=False),
                model=ModelRecord(conv_layers=3),
            )
        )
