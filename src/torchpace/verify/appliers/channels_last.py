"""channels_last (NHWC) for a conv net: the model converted at its first call, 4-D inputs too.

Module.to(memory_format=...) keeps the same Parameter objects, so the optimizer built on them
goes on updating the converted model.
"""

from __future__ import annotations

from typing import Any

from torchpace.doctor.finding import Finding
from torchpace.verify.appliers._calls import wrap_outer_calls
from torchpace.verify.appliers.base import Applier, Context, Fix, Params


def _plan(finding: Finding, context: Context) -> list[Fix] | None:
    if finding.rule != "channels-last":
        return None
    return [Fix("channels-last", "model and 4-D inputs in channels_last")]


def _apply(params: Params) -> None:
    import torch

    converted: set[int] = set()
    fmt = torch.channels_last

    def to_nhwc(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dim() == 4 and x.is_floating_point():
            return x.contiguous(memory_format=fmt)
        return x

    def around(module: Any, args: Any, kwargs: Any, call: Any, caller: Any) -> Any:
        if id(module) not in converted:
            converted.add(id(module))
            if any(isinstance(m, torch.nn.Conv2d) for m in module.modules()):
                module.to(memory_format=fmt)
        args = tuple(to_nhwc(a) for a in args)
        return call(*args, **{k: to_nhwc(v) for k, v in kwargs.items()})

    wrap_outer_calls(around)


CHANNELS_LAST = Applier("channels-last", _plan, _apply)
