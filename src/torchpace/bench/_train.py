"""The model side of a configuration: layout, checkpointing, compile, precision and the step."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.loader import batch_sampler, to_device
from torchpace.bench.techniques.checkpointing import repeated_blocks
from torchpace.bench.workloads.base import Batch, LossFn, Workload

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def prepare_model(
    model: nn.Module, config: RunConfig, settings: BenchSettings, device: torch.device
) -> nn.Module:
    """Move the model to the device and apply layout, checkpointing and compilation."""
    model = model.to(device)
    if config.channels_last:
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    if config.checkpointing:
        for block in repeated_blocks(model):
            block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False)  # type: ignore[method-assign]
    model.train()
    if config.compile:
        # A clean slate per configuration, so time to first step includes compilation every time.
        torch._dynamo.reset()
        model = torch.compile(model, backend=settings.compile_backend)  # type: ignore[assignment]
    return model


def make_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: LossFn,
    config: RunConfig,
    device: torch.device,
) -> Callable[[Batch], torch.Tensor]:
    """One optimisation step: forward and loss under autocast, backward, optimizer step."""
    dtype = AMP_DTYPES.get(config.amp)
    scaler = torch.amp.GradScaler("cuda") if config.amp == "fp16" else None

    def step(batch: Batch) -> torch.Tensor:
        inputs, targets = _layout(batch, config)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = loss_fn(model(inputs), targets)
        optimizer.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss

    return step


def _layout(batch: Batch, config: RunConfig) -> Batch:
    inputs, targets = batch
    if config.channels_last and isinstance(inputs, torch.Tensor) and inputs.dim() == 4:
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    return inputs, targets


def warm_memory(
    model: nn.Module,
    workload: Workload,
    config: RunConfig,
    settings: BenchSettings,
    device: torch.device,
) -> None:
    """Forward and backward on the largest batch this configuration will see; weights and buffers untouched."""
    lengths = workload.lengths
    assert lengths is not None, "memory warm-up applies only to variable-length workloads"
    indices = max(
        batch_sampler(workload, config, settings.seed),
        key=lambda b: len(b) * max(lengths[i] for i in b),
    )
    batch = to_device(_collate(workload, [workload.dataset[i] for i in indices]), device)
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    inputs, targets = _layout(batch, config)
    dtype = AMP_DTYPES.get(config.amp)
    with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
        loss = workload.loss(model(inputs), targets)
    loss.backward()
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        for name, b in model.named_buffers():
            b.copy_(buffers[name])


def _collate(workload: Workload, samples: list[Any]) -> Batch:
    if workload.collate is not None:
        return workload.collate(samples)
    from torch.utils.data import default_collate

    return default_collate(samples)  # type: ignore[no-any-return]
