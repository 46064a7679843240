"""Forward passes that build autograd graphs no backward uses (evaluation without no_grad)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.runner.sensors.whole_run import EvalPasses, WholeRun


# What evaluation with autograd on costs beyond the same pass under no_grad (the graph's nodes,
# the activations kept for a backward that never comes), as a share of the pass: an upper-bound
# assumption, not measured in the run (the run never evaluates both ways); a keyword parameter.
AUTOGRAD_SHARE = 0.2
WHOLE_RUN_METHOD = (
    "up to {share:.0%} of the evaluation time measured with autograd on (the graph-recording "
    "share of an eval forward; the rule's doc page), spread over the run's training steps"
)


@rule("grad-in-eval", input="live")
def grad_in_eval(
    live: Inspection, *, min_forwards_per_step: float = 0.5, autograd_share: float = AUTOGRAD_SHARE
) -> list[Finding]:
    """Flag forwards run with autograd on in steps that never call backward, and, in a followed
    run, evaluation passes with autograd on however often they run (one finding per cause)."""
    whole = live.whole_run
    passes = whole.evaluation if whole is not None else None
    if not live.model.watched() and (passes is None or not passes.grad_passes):
        raise NotApplicable(
            live.model.unwatched_reason(), "run with --warmup 1 or more, or --follow"
        )
    watched = _watched(live, min_forwards_per_step) if live.model.watched() else None
    if whole is None or passes is None or not passes.grad_passes:
        return [watched] if watched is not None else []
    return [_whole_run(live, whole, passes, watched, autograd_share)]


def _watched(live: Inspection, min_forwards_per_step: float) -> Finding | None:
    per_step = sum(g.count for g in live.model.grad_forwards) / live.model.steps
    if per_step < min_forwards_per_step:
        return None
    evaluating = [g for g in live.model.grad_forwards if not g.training]
    model = live.model.grad_forwards[0].module
    where = "after model.eval() " if evaluating else ""
    locations = tuple(g.location for g in live.model.grad_forwards if g.location is not None)
    return Finding(
        rule="grad-in-eval",
        severity=Severity.MEDIUM,
        summary=f"{per_step:.0f} forward pass(es) of {model} per step run {where}with autograd "
        "recording, and no backward uses the graph",
        evidence={
            "grad_forwards_per_step": per_step,
            "module": model,
            "eval_mode": bool(evaluating),
        },
        fix=FIX,
        locations=locations,
        caveat=""
        if evaluating
        else "The model was in training mode: if this is "
        "evaluation, also call model.eval() (dropout and BatchNorm behave differently).",
    )


FIX = "with torch.inference_mode():  # or torch.no_grad()\n    output = model(inputs)"


def _whole_run(
    live: Inspection,
    whole: WholeRun,
    passes: EvalPasses,
    watched: Finding | None,
    share: float,
) -> Finding:
    """The followed run's evaluation with autograd on: its measured cost per epoch and per run
    (the watched steps' figures kept when they saw it too: one finding per cause)."""
    epochs = max(1, whole.epochs)
    per_epoch_s = passes.grad_seconds / epochs
    saving = passes.grad_seconds * share * 1000.0 / whole.steps if whole.steps else None
    evidence: dict[str, EvidenceValue] = dict(watched.evidence) if watched is not None else {}
    evidence.update(
        eval_passes=passes.passes,
        grad_passes=passes.grad_passes,
        grad_eval_ms_per_epoch=round(per_epoch_s * 1000.0, 1),
        grad_eval_ms_per_run=round(passes.grad_seconds * 1000.0, 1),
        epochs=whole.epochs,
        module=passes.module or str(evidence.get("module", "")),
    )
    where = tuple(loc for loc in (passes.location,) if loc is not None)
    return Finding(
        rule="grad-in-eval",
        severity=Severity.MEDIUM,
        summary=f"{passes.grad_passes} of {passes.passes} evaluation pass(es) ran with autograd "
        f"on: {per_epoch_s:.1f} s per epoch, {passes.grad_seconds:.1f} s over the run, "
        "recording graphs no backward uses",
        evidence=evidence,
        fix=FIX,
        saving_ms=round(saving, 3) if saving is not None else None,
        saving_method=WHOLE_RUN_METHOD.format(share=share) if saving is not None else "",
        locations=tuple(dict.fromkeys((*where, *(watched.locations if watched else ())))),
        caveat=watched.caveat if watched is not None else "",
    )
