"""nn.DataParallel over one device unwrapped: its forward calls the model directly.

Inputs still go to the device DataParallel would have sent them to, so the script runs as
before without the scatter, replicate and gather of each step.
"""

from __future__ import annotations

import functools
from typing import Any

from torchpace.doctor.finding import Finding
from torchpace.verify.appliers.base import Applier, Context, Fix, Params


def _plan(finding: Finding, context: Context) -> list[Fix] | None:
    if finding.rule != "data-parallel":
        return None
    devices = finding.evidence.get("device_count")
    if not isinstance(devices, int) or devices > 1:
        return []  # several GPUs: DDP under torchrun is a code change
    return [Fix("data-parallel", "nn.DataParallel unwrapped (one device)")]


def _apply(params: Params) -> None:
    import torch
    from torch.utils._pytree import tree_map

    original = torch.nn.DataParallel.forward

    @functools.wraps(original)
    def forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
        if len(self.device_ids) > 1:
            return original(self, *inputs, **kwargs)
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        device = self.src_device_obj

        def move(x: Any) -> Any:
            return x.to(device, non_blocking=True) if isinstance(x, torch.Tensor) else x

        return self.module(*tree_map(move, inputs), **tree_map(move, kwargs))

    torch.nn.DataParallel.forward = forward  # type: ignore[method-assign]


UNWRAP = Applier("data-parallel", _plan, _apply)
