"""Evaluation forwards whose outputs no backward uses, run under torch.no_grad().

The finding names where the script calls the model (`locations`): those calls run without
autograd. Without locations, the model's forwards in eval mode do. A script that does call
backward through such a forward fails in that arm, and the report says so.
"""

from __future__ import annotations

from typing import Any

from torchpace.doctor.finding import Finding
from torchpace.verify.appliers._calls import wrap_outer_calls
from torchpace.verify.appliers.base import Applier, Context, Fix, Params


def _plan(finding: Finding, context: Context) -> list[Fix] | None:
    if finding.rule != "grad-in-eval":
        return None
    where = [[loc.file, loc.line] for loc in finding.locations]
    label = "the forward(s) flagged run under torch.no_grad()"
    return [Fix("no-grad", label, {"locations": where})]


def _apply(params: Params) -> None:
    import torch

    from torchpace.runner.patching import user_location

    places = {(str(f), int(line)) for f, line in params.get("locations", ())}

    def around(module: Any, args: Any, kwargs: Any, call: Any, caller: Any) -> Any:
        if not torch.is_grad_enabled():
            return call(*args, **kwargs)
        if places:
            loc = user_location(caller)
            chosen = loc is not None and (loc.file, loc.line) in places
        else:
            chosen = not module.training
        if not chosen:
            return call(*args, **kwargs)
        with torch.no_grad():
            return call(*args, **kwargs)

    wrap_outer_calls(around)


NO_GRAD = Applier("no-grad", _plan, _apply)
