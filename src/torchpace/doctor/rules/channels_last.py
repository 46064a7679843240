"""A conv net on the GPU fed NCHW tensors: tensor-core convolutions want channels_last (NHWC)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.doctor.live import Inspection


@rule("channels-last", input="live")
def channels_last(live: Inspection, *, min_convs: int = 2) -> list[Finding]:
    """Flag GPU conv nets whose convolutions take contiguous NCHW input."""
    if live.device_kind not in ("cuda", "rocm"):
        raise NotApplicable("channels_last is judged on GPUs only; this run is on the CPU")
    if live.conv_layers is None:
        raise NotApplicable(live.unwatched_reason())
    if live.conv_layers < min_convs or live.conv_input_channels_last is not False:
        return []
    mixed = bool(live.autocast_in_forward)
    return [
        Finding(
            rule="channels-last",
            severity=Severity.MEDIUM if mixed else Severity.LOW,
            summary=f"{live.conv_layers} convolutions per step take NCHW input: cuDNN's "
            "tensor-core kernels are NHWC, so it transposes around them",
            evidence={"conv_count": live.conv_layers, "autocast_in_forward": mixed},
            fix="model = model.to(memory_format=torch.channels_last)\n"
            "x = x.to(device, memory_format=torch.channels_last, non_blocking=True)",
            caveat=""
            if mixed
            else "The gain is largest with fp16/bf16 autocast; in fp32 it depends on the layers.",
        )
    ]
