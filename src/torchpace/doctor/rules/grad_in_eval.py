"""Forward passes that build autograd graphs no backward uses (evaluation without no_grad)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.runner.sensors.whole_run import EvalPasses, WholeRun


WHOLE_RUN_METHOD = (
    "the run's {forwards} eval forwards with autograd on, each {on:.2f} ms with it and {off:.2f} "
    "ms under no_grad ({how}), spread over the run's training steps"
)


@rule("grad-in-eval", input="live")
def grad_in_eval(live: Inspection, *, min_forwards_per_step: float = 0.5) -> list[Finding]:
    """Flag forwards run with autograd on in steps that never call backward, and, in a followed
    run, evaluation passes with autograd on however often they run (one finding per cause)."""
    whole = live.whole_run
    passes = whole.evaluation if whole is not None else None
    if not live.model.watched() and (passes is None or not passes.grad_passes):
        enable = live.model.unwatched_enable()
        raise NotApplicable(live.model.unwatched_reason(), enable and f"{enable}, or --follow")
    watched = _watched(live, min_forwards_per_step) if live.model.watched() else None
    if whole is None or passes is None or not passes.grad_passes:
        return [watched] if watched is not None else []
    return [_whole_run(whole, passes, watched)]


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


def _whole_run(whole: WholeRun, passes: EvalPasses, watched: Finding | None) -> Finding:
    """The followed run's evaluation with autograd on: its measured cost per epoch and per run
    (the watched steps' figures kept when they saw it too: one finding per cause), and what
    no_grad would save, from the same batch timed both ways (runner/autograd_cost.py)."""
    epochs = max(1, whole.epochs)
    per_epoch_s = passes.grad_seconds / epochs
    measured = passes.forward_ms
    saving = None
    if measured is not None and whole.steps:
        saving = max(0.0, measured[0] - measured[1]) * passes.grad_forwards / whole.steps
    evidence: dict[str, EvidenceValue] = dict(watched.evidence) if watched is not None else {}
    evidence.update(
        eval_passes=passes.passes,
        grad_passes=passes.grad_passes,
        grad_eval_ms_per_epoch=round(per_epoch_s * 1000.0, 1),
        grad_eval_ms_per_run=round(passes.grad_seconds * 1000.0, 1),
        epochs=whole.epochs,
        module=passes.module or str(evidence.get("module", "")),
    )
    if measured is not None:
        evidence.update(
            grad_forwards=passes.grad_forwards,
            forward_ms_autograd=round(measured[0], 3),
            forward_ms_no_grad=round(measured[1], 3),
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
        saving_method=_method(passes),
        locations=tuple(dict.fromkeys((*where, *(watched.locations if watched else ())))),
        caveat=_caveat(watched, passes),
    )


def _caveat(watched: Finding | None, passes: EvalPasses) -> str:
    """The watched steps' caveat; else why no saving is stated, where it could not be measured."""
    if watched is not None and watched.caveat:
        return watched.caveat
    return f"No saving is stated: {passes.forward_method}." if passes.forward_ms is None else ""


def _method(passes: EvalPasses) -> str:
    if passes.forward_ms is None:
        return ""
    on, off = passes.forward_ms
    return WHOLE_RUN_METHOD.format(
        forwards=passes.grad_forwards, on=on, off=off, how=passes.forward_method
    )
