"""A conv net fed NCHW tensors: cuDNN's tensor-core and oneDNN's CPU convolutions want channels_last."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.fixes import policy
from torchpace.policy.devices import is_cuda

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection

WHY = {
    "gpu": "cuDNN's tensor-core kernels are NHWC, so it transposes around them",
    "cpu": "oneDNN's CPU convolutions are fastest on NHWC (channels_last) data and reorder "
    "NCHW tensors around each one",
}


@rule("channels-last", input="live")
def channels_last(live: Inspection, *, min_convs: int = 2) -> list[Finding]:
    """Flag conv nets whose convolutions take contiguous NCHW input (GPU and CPU runs)."""
    if not is_cuda(live.device.kind) and live.device.kind != "cpu":
        raise NotApplicable(
            f"channels_last is judged on CUDA, ROCm and CPU runs, not {live.device.kind}"
        )
    if live.model.conv_layers is None:
        raise NotApplicable(live.model.unwatched_reason())
    if live.model.conv_layers < min_convs or live.model.conv_input_channels_last is not False:
        return []
    gpu = is_cuda(live.device.kind)
    mixed = bool(live.model.autocast_in_forward)
    target = policy.target(live.device.kind, live.host.cpu_bf16)
    return [
        Finding(
            rule="channels-last",
            severity=Severity.MEDIUM if mixed and gpu else Severity.LOW,
            summary=f"{live.model.conv_layers} convolutions per step take NCHW input: "
            + WHY["gpu" if gpu else "cpu"],
            evidence={"conv_count": live.model.conv_layers, "autocast_in_forward": mixed},
            fix=policy.channels_last_code(target),
            caveat=_caveat(gpu, mixed),
        )
    ]


def _caveat(gpu: bool, mixed: bool) -> str:
    if gpu:
        return (
            ""
            if mixed
            else ("The gain is largest with fp16/bf16 autocast; in fp32 it depends on the layers.")
        )
    return (
        "On a CPU the gain depends on the layers (torchpace bench measures it on a ResNet-style "
        "net); `torchpace doctor --verify` measures it on this script."
    )
