"""One training step per micro-batch: precision, accumulation with DDP no_sync, clipping, step."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from torchpace.train.precision import Mode, Precision

LossFn = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class StepOutput:
    """What one micro-batch call did.

    `loss` is this micro-batch's loss, detached and not divided by `accumulate` (reading it with
    `.item()` syncs with the device; do it only when you log). `stepped` is True only when the
    optimizer really stepped; `skipped` when an accumulation boundary was reached but fp16
    gradients overflowed. `grad_norm` is the total norm before clipping (a tensor, no sync).
    """

    loss: torch.Tensor
    stepped: bool
    skipped: bool = False
    grad_norm: torch.Tensor | None = None


def _model_output_loss(model: nn.Module, *args: Any, **kwargs: Any) -> torch.Tensor:
    """Default loss function: the model returns the loss (or an object with a `.loss`)."""
    out = model(*args, **kwargs)
    loss = getattr(out, "loss", out)
    if not isinstance(loss, torch.Tensor):
        raise TypeError(
            f"the model returned {type(out).__name__}, not a loss tensor; "
            "pass loss_fn=lambda model, x, y: criterion(model(x), y) to TrainStep"
        )
    return loss


def _param_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


class TrainStep:
    """Call once per micro-batch; steps the optimizer every `accumulate` calls.

    Under DDP the first `accumulate - 1` micro-batches run inside `model.no_sync()`, so gradients
    are all-reduced once per optimizer step. The loss is divided by `accumulate`, so batch B x
    accumulate k gives the gradients of batch B*k. Gradients are unscaled before clipping; the
    scheduler steps only when the optimizer really stepped (fp16 overflow skips both).
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        loss_fn: LossFn | None = None,
        precision: Precision | Mode | None = None,
        accumulate: int = 1,
        clip_grad_norm: float | None = None,
        scheduler: Any | None = None,
    ) -> None:
        if isinstance(accumulate, bool) or not isinstance(accumulate, int) or accumulate < 1:
            raise ValueError(
                f"accumulate must be a whole number >= 1; got {accumulate!r}, e.g. accumulate=4"
            )
        if clip_grad_norm is not None and not clip_grad_norm > 0:
            raise ValueError(
                f"clip_grad_norm must be > 0 or None; got {clip_grad_norm!r}, e.g. 1.0"
            )
        self.model = model
        self.optimizer = optimizer
        self.loss_fn: LossFn = loss_fn or _model_output_loss
        if precision is None:
            precision = "fp32"
        if isinstance(precision, str):
            precision = Precision(precision, device=_param_device(model))
        self.precision = precision
        self.accumulate = accumulate
        self.clip_grad_norm = clip_grad_norm
        self.scheduler = scheduler
        self.pending = 0  # micro-batches whose gradients wait for the next optimizer step

    def _sync_context(self, sync: bool) -> AbstractContextManager[Any]:
        no_sync = getattr(self.model, "no_sync", None)
        if sync or no_sync is None:
            return nullcontext()
        return no_sync()  # type: ignore[no-any-return]

    def _forward_backward(self, args: Any, kwargs: Any, *, sync: bool) -> torch.Tensor:
        with self._sync_context(sync):
            with self.precision.autocast():
                loss = self.loss_fn(self.model, *args, **kwargs)
            self.precision.backward(loss / self.accumulate)
        return loss.detach()

    def forward_backward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Forward, loss and backward without stepping or all-reducing; returns the loss."""
        return self._forward_backward(args, kwargs, sync=False)

    def __call__(self, *args: Any, **kwargs: Any) -> StepOutput:
        """Run one micro-batch: `loss_fn(model, *args, **kwargs)`, then step on the boundary."""
        last = self.pending + 1 == self.accumulate
        loss = self._forward_backward(args, kwargs, sync=last)
        self.pending += 1
        if not last:
            return StepOutput(loss=loss, stepped=False)
        self.pending = 0
        grad_norm = None
        if self.clip_grad_norm is not None:
            self.precision.unscale_(self.optimizer)  # clip the true gradients, not scaled ones
            params = [p for group in self.optimizer.param_groups for p in group["params"]]
            grad_norm = torch.nn.utils.clip_grad_norm_(params, self.clip_grad_norm)
        stepped = self.precision.step(self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)
        if stepped and self.scheduler is not None:
            self.scheduler.step()  # pytorch#44511: never advance the LR for a skipped step
        return StepOutput(loss=loss, stepped=stepped, skipped=not stepped, grad_norm=grad_norm)

    def reset(self) -> None:
        """Drop a partial accumulation (e.g. at the end of an epoch) and clear the gradients."""
        self.pending = 0
        self.optimizer.zero_grad(set_to_none=True)
