"""`checkpointing`: recompute block activations in backward instead of storing them (memory vs speed)."""

from __future__ import annotations

import torch
from torch import nn

from torchpace.bench.technique import Technique
from torchpace.bench.workloads.base import Workload


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The first ModuleList/Sequential holding two or more children of one type (the model's blocks)."""
    for module in model.modules():
        if isinstance(module, (nn.ModuleList, nn.Sequential)):
            children = list(module.children())
            kinds = {type(c) for c in children}
            if len(children) >= 2 and len(kinds) == 1:
                return children
    return []


class Checkpointing(Technique):
    """Activation checkpointing of each repeated block: less peak memory for ~30% more compute."""

    name = "checkpointing"
    summary = "activation checkpointing per block: lower peak memory, slower steps"
    # A trade of speed for memory: measured on its own, never stacked into the speed recipe.
    in_recipe = False
    # Recomputing each block's forward in backward can only add time.
    cost_only = True
    option = "checkpointing"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Needs repeated blocks to wrap."""
        if not repeated_blocks(workload.build_model()):
            return False, "the model has no repeated blocks (a ModuleList/Sequential of one type)"
        return True, ""


TECHNIQUE = Checkpointing()
