"""Mixed precision switched on around the model's forward: bf16 where it is native, else fp16 with
loss scaling on CUDA.

bf16 keeps fp32's range, so it needs no GradScaler: on CUDA from compute capability 8.0 (Ampere),
on ROCm, and on CPUs that compute bf16 natively (AVX512-BF16, AMX; emulated bf16 is slower).
A CUDA GPU before Ampere (V100, T4, RTX 20xx: capability below 8.0) gets fp16, whose 5-bit
exponent underflows small gradients: the arm adds a torch.amp.GradScaler that the script's own
backward, optimizer steps and gradient clipping drive (_loss_scaling.py), as the printed fix
(fixes/policy.py: autocast_code) does by hand. A script that steps with a closure (LBFGS) cannot
be driven by a GradScaler: its fp16 arm stops as not applicable and needs a code change.
"""

from __future__ import annotations

from typing import Any

from torchpace.doctor.finding import Finding
from torchpace.fixes.policy import mixed_precision, target
from torchpace.policy.devices import is_cuda
from torchpace.verify.appliers._calls import wrap_outer_calls
from torchpace.verify.appliers._loss_scaling import LossScaling, install
from torchpace.verify.appliers.base import Applier, Context, Fix, Params

NUMERICS = "bf16 matmuls and convolutions (8-bit mantissa): compare the loss curve"
FP16_NUMERICS = (
    "fp16 matmuls and convolutions (10-bit mantissa, 5-bit exponent), the loss scaled by a "
    "GradScaler that skips steps whose gradients hold inf/NaN: compare the loss curve"
)


def _plan(finding: Finding, context: Context) -> list[Fix] | None:
    if finding.rule != "no-mixed-precision":
        return None
    cc = context.compute_capability
    if context.device == "cuda" and cc is None:
        return []  # a GPU of unknown capability: neither fp16 nor bf16 is known to be safe
    # What the policy would try on this device (fixes.policy.mixed_precision): measured here.
    t = target(context.device, context.cpu_bf16, cc)
    candidate = mixed_precision(t).candidate
    if candidate == "fp16":
        label = (
            'torch.amp.autocast("cuda", dtype=torch.float16) around the forward, '
            'loss scaled by torch.amp.GradScaler("cuda")'
        )
        params = {"device": "cuda", "dtype": "float16"}
        return [Fix("autocast", label, params, numerics=FP16_NUMERICS)]
    if candidate != "bf16":
        return []  # a CPU without native bf16, a GPU without tensor cores
    device = "cuda" if is_cuda(context.device) else "cpu"
    label = f'torch.autocast("{device}", dtype=torch.bfloat16) around the forward'
    return [Fix("autocast", label, {"device": device}, numerics=NUMERICS)]


def autocast_forward(device: str, dtype_name: str) -> None:
    """Every outermost forward under autocast to `dtype_name`, its outputs back in fp32."""
    import torch

    from torchpace.data._tree import map_tensors

    dtype = getattr(torch, dtype_name)

    def to_fp32(t: torch.Tensor) -> torch.Tensor:
        return t.float() if t.dtype == dtype else t

    def around(module: Any, args: Any, kwargs: Any, call: Any, caller: Any) -> Any:
        with torch.autocast(device, dtype=dtype):
            out = call(*args, **kwargs)
        # The loss runs outside the wrapped forward: autocast would run it in fp32, so its inputs
        # go back to fp32 (a bf16 logit against an fp32 class weight fails in cross_entropy:
        # examples/naive_train.py's autocast arm did, before this).
        return map_tensors(out, to_fp32)

    wrap_outer_calls(around)


def fp16_with_scaler(device: str) -> LossScaling:
    """The fp16 arm: fp16 autocast around the forward and a GradScaler in the loop."""
    autocast_forward(device, "float16")
    return install(device)


def _apply(params: Params) -> None:
    device = str(params.get("device", "cpu"))
    if params.get("dtype") == "float16":
        fp16_with_scaler(device)
    else:
        autocast_forward(device, "bfloat16")


AUTOCAST = Applier("autocast", _plan, _apply)
