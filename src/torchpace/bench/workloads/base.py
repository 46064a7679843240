"""A benchmark workload: a model, a dataset, a loss, and how to batch and count its work."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn
from torch.utils.data import Dataset

Batch = tuple[Any, Any]
LossFn = Callable[[Any, Any], torch.Tensor]
OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]


def default_optimizer(params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    """Plain SGD with momentum: deterministic, and the same math under every technique."""
    return torch.optim.SGD(params, lr=0.01, momentum=0.9)


def count_samples(batch: Batch) -> int:
    """Units of work in a batch: its samples (the leading dimension of its inputs)."""
    inputs = batch[0]
    if isinstance(inputs, torch.Tensor):
        return int(inputs.shape[0])
    return len(inputs)


@dataclass(frozen=True)
class Workload:
    """What the harness trains: batches are `(inputs, targets)`; the loss is `loss(model(inputs), targets)`."""

    name: str
    build_model: Callable[[], nn.Module]
    dataset: Dataset[Any]
    loss: LossFn
    batch_size: int
    collate: Callable[[list[Any]], Batch] | None = None
    # "samples" or "tokens": what throughput counts (tokens for text: real tokens, not padding).
    unit: Literal["samples", "tokens"] = "samples"
    count_units: Callable[[Batch], int] = count_samples
    # Per-sample lengths for variable-length data; None when every sample has the same shape.
    lengths: Sequence[int] | None = None
    # Token budget per batch for the token-budget sampler (None: batch_size x median length).
    token_budget: int | None = None
    make_optimizer: OptimizerFactory = default_optimizer
    has_convolutions: bool = False
    # Batches per epoch: short epochs so the cost of starting workers each epoch shows.
    epoch_batches: int | None = None
    description: str = ""
    # Free-form facts shown in reports (model size, image size, sequence lengths...).
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def variable_length(self) -> bool:
        """True when samples differ in length, so bucketing and token budgets apply."""
        return self.lengths is not None


def has_convolutions(model: nn.Module) -> bool:
    """True when the model has any 2-d convolution (channels_last and cudnn autotuning apply)."""
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def parameter_count(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
