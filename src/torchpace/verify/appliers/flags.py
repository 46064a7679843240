"""Global switches for faster GPU math: TF32 matmuls and convolutions, cudnn.benchmark."""

from __future__ import annotations

from torchpace.doctor.finding import Finding
from torchpace.verify.appliers._calls import keep
from torchpace.verify.appliers.base import Applier, Context, Fix, Params


def _plan_tf32(finding: Finding, context: Context) -> list[Fix] | None:
    if finding.rule != "tf32-disabled":
        return None
    numerics = "TF32 matmuls and convolutions (10-bit mantissa inputs, fp32 accumulation)"
    return [Fix("tf32", "TF32 on (set_float32_matmul_precision('high'))", {}, numerics)]


def _apply_tf32(params: Params) -> None:
    import torch

    from torchpace.environment.tf32 import conv_switches

    keep(torch, "set_float32_matmul_precision", "high")  # also writes the per-backend switches
    for _, owner, attr, value in conv_switches(tf32=True):
        setattr(owner, attr, value)


def _plan_benchmark(finding: Finding, context: Context) -> list[Fix] | None:
    if finding.rule != "cudnn-benchmark-off":
        return None
    return [Fix("cudnn-benchmark", "torch.backends.cudnn.benchmark = True")]


def _apply_benchmark(params: Params) -> None:
    import torch

    torch.backends.cudnn.benchmark = True


TF32 = Applier("tf32", _plan_tf32, _apply_tf32)
CUDNN_BENCHMARK = Applier("cudnn-benchmark", _plan_benchmark, _apply_benchmark)
