"""Small tensors built on the host every step and copied to the device (a sync-prone H2D copy each)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection


@rule("host-tensor-creation", input="live")
def host_tensor_creation(live: Inspection) -> list[Finding]:
    """Flag places that make a small tensor on the host and move it to the device in every step."""
    if live.model.steps == 0:
        raise NotApplicable(
            live.model.unwatched_reason(),
            live.model.unwatched_enable(),
        )
    if live.flags.compiled:
        raise NotApplicable("torch.compile is in use: the doctor does not watch ops under it")
    if not live.model.host_tensors:
        return []
    per_step = sum(h.count_per_step for h in live.model.host_tensors)
    locations = tuple(
        replace(h.location, count=round(h.count_per_step)) for h in live.model.host_tensors
    )
    first = live.model.host_tensors[0].location
    return [
        Finding(
            rule="host-tensor-creation",
            severity=Severity.MEDIUM if per_step >= 4 else Severity.LOW,
            summary=f"{per_step:.0f} small tensor(s) per step are built on the host and copied "
            f"to the device (first at {first.file}:{first.line})",
            evidence={
                "copies_per_step": per_step,
                "places": [str(loc) for loc in locations],
                "max_bytes": max(h.nbytes for h in live.model.host_tensors),
            },
            fix=(
                "# build constants once, on the device, before the loop:\n"
                "scale = torch.tensor(0.5, device=device)\n"
                "# or keep Python numbers (x * 0.5) and let PyTorch treat them as scalars"
            ),
            locations=locations,
            caveat="Each copy is tiny; the cost is the launch and, from pageable memory, a "
            "host-device synchronisation that stops the CPU from running ahead.",
        )
    ]
