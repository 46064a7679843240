"""A convolution with a bias feeds straight into BatchNorm, which cancels the bias."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection


@rule("conv-bias-before-bn", input="live")
def conv_bias_before_bn(live: Inspection) -> list[Finding]:
    """Flag conv layers whose bias BatchNorm subtracts away again (wasted add and gradient)."""
    if live.model.steps == 0 or live.model.conv_layers is None:
        raise NotApplicable(
            live.model.unwatched_reason(),
            live.model.unwatched_enable(),
        )
    pairs = live.model.conv_bias_before_bn
    if not pairs:
        return []
    names = [f"{p.conv} -> {p.bn}" for p in pairs]
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return [
        Finding(
            rule="conv-bias-before-bn",
            severity=Severity.LOW,
            summary=(
                f"{len(pairs)} of {live.model.conv_layers} convolutions add a bias that the next "
                f"BatchNorm subtracts again ({shown})"
            ),
            evidence={
                "pairs": list[EvidenceValue](names),
                "pair_count": len(pairs),
                "conv_count": live.model.conv_layers,
            },
            fix=(
                f"nn.{pairs[0].conv_type}(in_ch, out_ch, kernel_size, bias=False)  "
                "# before BatchNorm: its mean subtraction removes any bias"
            ),
            caveat="Results are unchanged up to float rounding; old checkpoints hold the bias "
            "tensors (load them with strict=False).",
        )
    ]
