"""Smells only a GPU shows; run on the GPU machine (skipped without CUDA)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.doctor.registry import NotApplicable, get_rule
from torchpace.runner.run import DoctorOptions, RunResult, Target, run_target

DoctorRun = Callable[..., RunResult]
EXAMPLES = Path(__file__).parents[2] / "examples"


def fired(rule: str, result: RunResult) -> bool:
    try:
        return bool(get_rule(rule).func(result.inspection))
    except NotApplicable:
        return False


@pytest.mark.cuda
def test_cudnn_benchmark_off_on_a_fixed_shape_conv_net(doctor_run: DoctorRun) -> None:
    smelly = doctor_run("cudnn_benchmark.py")
    assert smelly.inspection.device.kind == "cuda" and smelly.inspection.model.input_shapes_static
    assert fired("cudnn-benchmark-off", smelly)
    assert not fired("cudnn-benchmark-off", doctor_run("cudnn_benchmark.py", "--fixed"))


@pytest.mark.cuda
def test_host_tensor_copied_to_the_gpu_every_step(doctor_run: DoctorRun) -> None:
    assert fired("host-tensor-creation", doctor_run("host_tensor.py"))
    assert not fired("host-tensor-creation", doctor_run("host_tensor_fixed.py"))


@pytest.mark.cuda
def test_naive_example_on_a_gpu(tmp_path: Path, clean_torch: None) -> None:
    options = DoctorOptions(out_dir=tmp_path, warmup=3, steps=3)
    result = run_target(Target(str(EXAMPLES / "naive_train.py"), ("--epochs", "1")), options)
    rules = ("host-tensor-creation", "cudnn-benchmark-off", "grad-in-eval", "channels-last")
    assert all(fired(rule, result) for rule in rules)
    assert result.inspection.model.autocast_in_forward is False
