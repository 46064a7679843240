"""A conv net with fixed input shapes runs with cudnn.benchmark off (cuDNN's default heuristics)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.policy.devices import is_cuda

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection


@rule("cudnn-benchmark-off", input="live")
def cudnn_benchmark_off(live: Inspection) -> list[Finding]:
    """Flag conv nets on cuDNN with fixed shapes that do not let cuDNN pick its fastest kernels."""
    if not is_cuda(live.device.kind):
        raise NotApplicable("cuDNN is only used on a GPU; this run is on the CPU")
    if live.model.conv_layers is None or live.flags.cudnn_benchmark is None:
        raise NotApplicable(
            live.model.unwatched_reason(),
            live.model.unwatched_enable(),
        )
    if live.model.conv_layers == 0 or live.flags.cudnn_benchmark:
        return []
    static = live.model.input_shapes_static
    caveat = ""
    if static is False:
        return []  # shapes change: benchmark mode would re-tune for every new shape
    if static is None:
        caveat = "The input shapes were not seen; with shapes that vary every step, leave it off."
    return [
        Finding(
            rule="cudnn-benchmark-off",
            severity=Severity.MEDIUM,
            summary=f"{live.model.conv_layers} convolutions per step run with "
            "torch.backends.cudnn.benchmark = False although the input shape never changes",
            evidence={"conv_count": live.model.conv_layers, "input_shapes_static": static},
            fix="torch.backends.cudnn.benchmark = True  # once, before the training loop",
            caveat=caveat,
        )
    ]
