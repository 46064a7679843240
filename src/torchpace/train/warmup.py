"""Warm the caching allocator up on the longest batch, leaving the training state untouched.

With variable-length batches, each new longest batch makes the CUDA caching allocator ask the
driver for more memory (cudaMalloc, and on pressure a free-everything retry). One forward+backward
on the longest batch up front reserves the largest blocks once; later batches reuse them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from torchpace.train.step import TrainStep


@dataclass(frozen=True)
class MemoryWarmup:
    """Allocator figures after the warm-up (CUDA only; None on other devices)."""

    device: str
    peak_allocated_bytes: int | None
    reserved_bytes: int | None


def _as_args(batch: Any) -> tuple[Any, ...]:
    return tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)


def _device_of(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _run_once(step_fn: Any, batch: Any, model: nn.Module) -> None:
    if isinstance(step_fn, TrainStep):
        # forward_backward runs under no_sync: no all-reduce, no optimizer step.
        step_fn.forward_backward(*_as_args(batch))
        return
    loss = step_fn(batch)
    if not isinstance(loss, torch.Tensor):
        raise TypeError(
            f"warmup_memory: step_fn must return the loss tensor; it returned "
            f"{type(loss).__name__}. Pass a function that does the forward and returns the loss"
        )
    loss.backward()


def _forked_rng(device: torch.device) -> Any:
    devices: Sequence[int] = [device.index or 0] if device.type == "cuda" else []
    return torch.random.fork_rng(devices=devices, device_type="cuda")


def warmup_memory(
    step_fn: TrainStep | Callable[[Any], torch.Tensor],
    longest_batch: Any,
    *,
    model: nn.Module | None = None,
) -> MemoryWarmup:
    """One forward+backward on `longest_batch`; no optimizer step, nothing left changed.

    `step_fn` is a TrainStep, or a function `batch -> loss` (then pass `model=`). Afterwards the
    parameters, their gradients (the same tensor objects as before), the buffers (BatchNorm
    statistics), the optimizer state and the RNG state are exactly what they were.
    """
    if model is None:
        if not isinstance(step_fn, TrainStep):
            raise TypeError(
                "warmup_memory needs model= when step_fn is a plain function "
                "(it restores that model's gradients and buffers)"
            )
        model = step_fn.model
    params = list(model.parameters())
    grads = [p.grad for p in params]
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    for p in params:
        p.grad = None
    device = _device_of(model)
    try:
        with _forked_rng(device):
            _run_once(step_fn, longest_batch, model)
    finally:
        for p, g in zip(params, grads, strict=True):
            p.grad = g  # drop the warm-up gradients; their blocks stay cached for reuse
        with torch.no_grad():
            for buf, saved in buffers:
                buf.copy_(saved)
    return _report(device)


def _report(device: torch.device) -> MemoryWarmup:
    if device.type != "cuda":
        return MemoryWarmup(str(device), None, None)
    return MemoryWarmup(
        str(device),
        int(torch.cuda.max_memory_allocated(device)),
        int(torch.cuda.memory_reserved(device)),
    )
