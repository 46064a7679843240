"""Mixed precision switched on around the model's forward: bf16 autocast where it is native.

bf16 keeps fp32's range, so it needs no GradScaler: on CUDA from compute capability 8.0 (Ampere),
on ROCm, and on CPUs that compute bf16 natively (AVX512-BF16, AMX; emulated bf16 is slower).
fp16 (older GPUs) needs a GradScaler in the training loop: that is a code change.
"""

from __future__ import annotations

from typing import Any

from torchpace.doctor.finding import Finding
from torchpace.verify.appliers._calls import wrap_outer_calls
from torchpace.verify.appliers.base import Applier, Context, Fix, Params

NUMERICS = "bf16 matmuls and convolutions (8-bit mantissa): compare the loss curve"


def _bf16_native(context: Context) -> bool:
    if context.device == "rocm":
        return True
    if context.device == "cuda":
        cc = context.compute_capability
        return cc is not None and cc >= (8, 0)
    return context.device == "cpu" and context.cpu_bf16 in ("amx", "avx512_bf16")


def _plan(finding: Finding, context: Context) -> list[Fix] | None:
    if finding.rule != "no-mixed-precision":
        return None
    if not _bf16_native(context):
        return []  # fp16 needs a GradScaler in the loop
    device = "cuda" if context.device in ("cuda", "rocm") else "cpu"
    label = f'torch.autocast("{device}", dtype=torch.bfloat16) around the forward'
    return [Fix("autocast", label, {"device": device}, numerics=NUMERICS)]


def _apply(params: Params) -> None:
    import torch

    from torchpace.data._tree import map_tensors

    device = str(params.get("device", "cpu"))

    def to_fp32(t: torch.Tensor) -> torch.Tensor:
        return t.float() if t.dtype == torch.bfloat16 else t

    def around(module: Any, args: Any, kwargs: Any, call: Any, caller: Any) -> Any:
        with torch.autocast(device, dtype=torch.bfloat16):
            out = call(*args, **kwargs)
        # The loss runs outside the wrapped forward: autocast would run it in fp32, so its inputs
        # go back to fp32 (a bf16 logit against an fp32 class weight fails in cross_entropy:
        # examples/naive_train.py's autocast arm did, before this).
        return map_tensors(out, to_fp32)

    wrap_outer_calls(around)


AUTOCAST = Applier("autocast", _plan, _apply)
