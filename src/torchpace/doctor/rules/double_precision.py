"""Model parameters in float64: every matmul and convolution runs at double precision."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.policy.devices import is_cuda

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection


@rule("double-precision", input="live")
def double_precision(live: Inspection, *, min_share: float = 0.01) -> list[Finding]:
    """Flag models whose parameters are float64 (model.double(), or float64 numpy data)."""
    if not live.model.watched():
        raise NotApplicable(live.model.unwatched_reason())
    total = sum(n for _, n in live.model.param_dtypes)
    doubles = sum(n for dtype, n in live.model.param_dtypes if dtype == "float64")
    share = doubles / total if total else 0.0
    if share < min_share:
        return []
    gpu = is_cuda(live.device.kind)
    return [
        Finding(
            rule="double-precision",
            severity=Severity.HIGH if gpu else Severity.MEDIUM,
            summary=f"{share:.0%} of the model's {total:,} parameters are float64: "
            + (
                "GPUs run fp64 at a small fraction of their fp32 speed"
                if gpu
                else "double precision halves the CPU's vector throughput and doubles memory traffic"
            ),
            evidence={"float64_share": share, "float64_params": doubles, "params": total},
            fix="model = model.float()\n"
            "x = torch.from_numpy(array).float()  # numpy arrays default to float64",
            caveat="This changes numerics (float64 -> float32): keep float64 only where the "
            "math needs it.",
        )
    ]
