"""Appliers switched on in this process (as the child does), then undone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn

from torchpace.verify.appliers import apply


@pytest.fixture
def module_call_restored() -> Iterator[None]:
    original = nn.Module.__call__
    yield
    nn.Module.__call__ = original  # type: ignore[method-assign]


def test_autocast_arm_runs_the_forward_in_bf16_and_hands_the_loss_fp32(
    module_call_restored: None,
) -> None:
    """naive_train's loss, cross_entropy with an fp32 class weight, failed on bf16 logits."""
    seen: list[torch.dtype] = []
    model = nn.Sequential(nn.Linear(8, 4))
    model.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    apply([{"applier": "autocast", "device": "cpu"}])
    logits = model(torch.randn(16, 8))
    loss = nn.functional.cross_entropy(logits, torch.randint(0, 4, (16,)), weight=torch.ones(4))
    loss.backward()
    assert seen == [torch.bfloat16] and logits.dtype == torch.float32
    assert model[0].weight.grad is not None and model[0].weight.grad.dtype == torch.float32
