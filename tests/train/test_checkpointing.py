"""checkpoint_modules: same loss and gradients, fewer saved activations, outermost only."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchpace.train import checkpoint_modules


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Dropout(0.2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.inner(x)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), Block(), Block(), nn.Linear(16, 1))


def _grads(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    torch.manual_seed(123)  # dropout must draw the same masks, and does through the recompute
    model(x).pow(2).mean().backward()
    return [p.grad.clone() for p in model.parameters()]


def test_same_gradients_with_dropout():
    x = torch.randn(4, 8)
    plain = _grads(_model(), x)
    model = _model()
    assert checkpoint_modules(model, Block) == ["1", "2"]
    for a, b in zip(plain, _grads(model, x), strict=True):
        torch.testing.assert_close(a, b)


def test_saves_fewer_tensors_for_backward():
    def saved(model: nn.Module) -> int:
        count = 0

        def pack(t: torch.Tensor) -> torch.Tensor:
            nonlocal count
            count += 1
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(torch.randn(4, 8)).sum()
        return count

    model = _model()
    before = saved(model)
    checkpoint_modules(model, (Block,))
    assert saved(model) < before


def test_outermost_only_and_idempotent():
    model = _model()
    assert checkpoint_modules(model, (Block, nn.Linear)) == ["0", "1", "2", "3"]
    assert checkpoint_modules(model, (Block,)) == []


def test_no_match_is_an_error():
    with pytest.raises(ValueError, match="found no module of type Conv2d in Sequential"):
        checkpoint_modules(_model(), nn.Conv2d)


def test_types_must_be_module_classes():
    with pytest.raises(TypeError, match=r"checkpoint_modules needs nn.Module subclasses; got"):
        checkpoint_modules(_model(), ["Block"])
