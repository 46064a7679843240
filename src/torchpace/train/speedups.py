"""Global and model-level speed settings, applied in one call and recorded so they can be undone.

Numerics: `compile`, `channels_last` and `cudnn_benchmark` compute the same math (results may
differ at float-rounding level, as any change of kernel does). `tf32` does change numerics: fp32
matmuls and convolutions on Ampere and later GPUs round their inputs to 10 mantissa bits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from torchpace.environment.tf32 import conv_switches, matmul_precision, set_matmul_precision


@dataclass(frozen=True)
class Change:
    """One setting apply_speedups changed: its name and its value before and after."""

    setting: str
    before: Any
    after: Any


@dataclass
class AppliedSpeedups:
    """What apply_speedups changed, in order; `undo()` puts every setting back."""

    changes: list[Change] = field(default_factory=list)
    _undo: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def record(self, setting: str, before: Any, after: Any, undo: Callable[[], None]) -> None:
        """Note one change and how to revert it."""
        self.changes.append(Change(setting, before, after))
        self._undo.append(undo)

    def undo(self) -> None:
        """Revert every change, last first."""
        while self._undo:
            self._undo.pop()()
        self.changes.clear()

    def __str__(self) -> str:
        if not self.changes:
            return "apply_speedups: nothing changed"
        lines = [f"  {c.setting}: {c.before!r} -> {c.after!r}" for c in self.changes]
        return "apply_speedups changed:\n" + "\n".join(lines)


def has_4d_convs(model: nn.Module) -> bool:
    """True when the model has 2-D convolutions (4-D weights), where channels_last pays off."""
    return any(
        isinstance(m, nn.modules.conv._ConvNd) and m.weight.dim() == 4 for m in model.modules()
    )


def _set_attr(record: AppliedSpeedups, owner: Any, attr: str, value: Any, name: str) -> None:
    before = getattr(owner, attr)
    if before == value:
        return
    setattr(owner, attr, value)
    record.record(name, before, value, lambda: setattr(owner, attr, before))


def _apply_tf32(record: AppliedSpeedups) -> None:
    # Matmuls through the legacy setter, which in torch >= 2.9 also writes the per-backend
    # switches: set through the new API alone, the legacy getter Lightning reads raises
    # (torchpace.environment.tf32). cuDNN's conv and RNN switches together, for the same reason.
    before = matmul_precision()
    if before == "highest":
        set_matmul_precision("high")
        record.record(
            "float32_matmul_precision", before, "high", lambda: set_matmul_precision(before)
        )
    for name, owner, attr, value in conv_switches(tf32=True):
        _set_attr(record, owner, attr, value, name)


def _apply_channels_last(record: AppliedSpeedups, model: nn.Module) -> None:
    changed = [
        p
        for p in model.parameters()
        if p.dim() == 4 and not p.is_contiguous(memory_format=torch.channels_last)
    ]
    if not changed:
        return
    # Module.to keeps the Parameter objects (it swaps .data), so optimizers stay valid.
    model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    def undo() -> None:
        with torch.no_grad():
            for p in changed:
                p.data = p.data.contiguous(memory_format=torch.contiguous_format)

    record.record("model.memory_format", "contiguous_format", "channels_last", undo)


def _apply_compile(record: AppliedSpeedups, model: nn.Module, options: Mapping[str, Any]) -> None:
    # Module.compile() compiles in place: same object, same state_dict keys (no "_orig_mod.").
    model.compile(**options)

    def undo() -> None:
        model._compiled_call_impl = None

    record.record("model.compile", None, dict(options), undo)


def apply_speedups(
    model: nn.Module,
    *,
    compile: bool | Mapping[str, Any] = False,
    channels_last: bool | None = None,
    cudnn_benchmark: bool = True,
    tf32: bool = True,
) -> AppliedSpeedups:
    """Apply speed settings to `model` and globally; returns what changed, with `.undo()`.

    Args:
        compile: True, or a dict of `torch.compile` options (e.g. {"backend": "eager"}).
        channels_last: None means only for models with 2-D convolutions.
        cudnn_benchmark: let cuDNN pick the fastest algorithm per input shape.
        tf32: TF32 for fp32 matmuls and convolutions (changes numerics slightly).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"apply_speedups needs an nn.Module; got {type(model).__name__}")
    record = AppliedSpeedups()
    if cudnn_benchmark:
        _set_attr(record, torch.backends.cudnn, "benchmark", True, "cudnn.benchmark")
    if tf32:
        _apply_tf32(record)
    if channels_last is None:
        channels_last = has_4d_convs(model)
    if channels_last:
        _apply_channels_last(record, model)
    if compile:
        _apply_compile(record, model, {} if compile is True else compile)
    return record
