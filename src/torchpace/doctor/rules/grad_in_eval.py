"""Forward passes that build autograd graphs no backward uses (evaluation without no_grad)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection


@rule("grad-in-eval", input="live")
def grad_in_eval(live: Inspection, *, min_forwards_per_step: float = 0.5) -> list[Finding]:
    """Flag forwards run with autograd on in steps that never call backward."""
    if not live.model.watched():
        raise NotApplicable(
            live.model.unwatched_reason(),
            "run with --warmup 1 or more",
        )
    per_step = sum(g.count for g in live.model.grad_forwards) / live.model.steps
    if per_step < min_forwards_per_step:
        return []
    evaluating = [g for g in live.model.grad_forwards if not g.training]
    model = live.model.grad_forwards[0].module
    where = "after model.eval() " if evaluating else ""
    locations = tuple(g.location for g in live.model.grad_forwards if g.location is not None)
    return [
        Finding(
            rule="grad-in-eval",
            severity=Severity.MEDIUM,
            summary=f"{per_step:.0f} forward pass(es) of {model} per step run {where}with autograd "
            "recording, and no backward uses the graph",
            evidence={
                "grad_forwards_per_step": per_step,
                "module": model,
                "eval_mode": bool(evaluating),
            },
            fix="with torch.inference_mode():  # or torch.no_grad()\n    output = model(inputs)",
            locations=locations,
            caveat=""
            if evaluating
            else "The model was in training mode: if this is "
            "evaluation, also call model.eval() (dropout and BatchNorm behave differently).",
        )
    ]
