"""The model side of a configuration, through torchpace.train: speed settings, checkpointing, precision."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils.data import default_collate

from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.loader import batch_sampler, to_device
from torchpace.bench.techniques.checkpointing import repeated_blocks
from torchpace.bench.workloads.base import Batch, LossFn, Workload
from torchpace.train import Precision, apply_speedups, checkpoint_modules, warmup_memory

PRECISION_MODES = {"off": "fp32", "bf16": "bf16", "fp16": "fp16"}


def prepare_model(
    model: nn.Module, config: RunConfig, settings: BenchSettings, device: torch.device
) -> nn.Module:
    """Move the model to the device, checkpoint its blocks, and apply the speed settings asked for."""
    model = model.to(device).train()
    if config.checkpointing:
        checkpoint_modules(model, type(repeated_blocks(model)[0]))
    if config.compile:
        # A clean slate per configuration, so time to first step includes compilation every time.
        torch._dynamo.reset()
    # Global flags it sets are put back by loop.backend_flags when the configuration ends.
    apply_speedups(
        model,
        compile={"backend": settings.compile_backend} if config.compile else False,
        channels_last=config.channels_last,
        cudnn_benchmark=config.cudnn_benchmark,
        tf32=config.tf32,
    )
    return model


def precision(config: RunConfig, device: torch.device) -> Precision:
    """torchpace.train.Precision for this configuration (fp32: autocast off)."""
    return Precision(PRECISION_MODES[config.amp], device)  # type: ignore[arg-type]


def make_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: LossFn,
    config: RunConfig,
    device: torch.device,
) -> Callable[[Batch], torch.Tensor]:
    """One optimisation step: forward and loss under autocast, (scaled) backward, optimizer step."""
    amp = precision(config, device)

    def step(batch: Batch) -> torch.Tensor:
        inputs, targets = layout(batch, config)
        with amp.autocast():
            loss = loss_fn(model(inputs), targets)
        optimizer.zero_grad(set_to_none=True)
        amp.backward(loss)
        amp.step(optimizer)
        return loss

    return step


def layout(batch: Batch, config: RunConfig) -> Batch:
    """Inputs in channels_last when the configuration asks for it (4-D image batches only)."""
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
    """torchpace.train.warmup_memory on the largest batch this configuration will see."""
    lengths = workload.lengths
    assert lengths is not None, "memory warm-up applies only to variable-length workloads"
    indices = max(
        batch_sampler(workload, config, settings.seed),
        key=lambda b: len(b) * max(lengths[i] for i in b),
    )
    collate = workload.collate or default_collate
    batch = to_device(collate([workload.dataset[i] for i in indices]), device)
    amp = precision(config, device)

    def forward(b: Batch) -> torch.Tensor:
        inputs, targets = layout(b, config)
        with amp.autocast():
            return workload.loss(model(inputs), targets)

    warmup_memory(forward, batch, model=model)
