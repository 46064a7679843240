"""Smells only a GPU shows (run on the GPU machine, skipped without CUDA), and the global switches
those in-process runs read and leave behind (on any machine)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from torch_state import torch_left_clean

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
    silent = [rule for rule in rules if not fired(rule, result)]
    assert silent == [], f"did not fire: {silent}; flags seen: {result.inspection.flags}"
    assert result.inspection.model.autocast_in_forward is False


def test_a_scripts_global_switches_are_put_back_for_the_next_run() -> None:
    # On the H200, test_cudnn_benchmark_off's `--fixed` run (in-process) left cudnn.benchmark on,
    # and the naive example's run after it found no cudnn-benchmark-off.
    import torch

    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv

    def state() -> tuple[object, ...]:
        switches = (torch.backends.cudnn.benchmark, matmul.fp32_precision, conv.fp32_precision)
        return (*switches, torch.get_float32_matmul_precision())

    before = state()
    with torch_left_clean():
        torch.backends.cudnn.benchmark = not before[0]
        torch.set_float32_matmul_precision("medium")
        conv.fp32_precision = "ieee" if before[2] == "tf32" else "tf32"
    assert state() == before


def test_tf32_set_through_the_new_api_is_read(doctor_run: DoctorRun) -> None:
    # torch >= 2.9: with TF32 set through torch.backends.cuda.matmul.fp32_precision alone, the
    # legacy torch.get_float32_matmul_precision() raises; the doctor's flag sensor read it and
    # the run ended in that traceback.
    flags = doctor_run("tf32_new_api.py").inspection.flags
    assert flags.tf32_matmul is True and flags.float32_matmul_precision == "high"
    assert flags.tf32_cudnn is True
