"""Activation checkpointing for chosen module types: trade recompute for activation memory.

The same math runs twice (forward again during backward, with the RNG state restored so dropout
matches), so gradients equal those without checkpointing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

_MARK = "_torchpace_checkpointed"


def _checkpointed(forward: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if not torch.is_grad_enabled():
        return forward(*args, **kwargs)  # nothing to save for backward: skip the wrapper
    return checkpoint(forward, *args, use_reentrant=False, **kwargs)


def _check_types(types: Any) -> tuple[type[nn.Module], ...]:
    if isinstance(types, type):
        types = (types,)
    types = tuple(types)
    if not types or not all(isinstance(t, type) and issubclass(t, nn.Module) for t in types):
        raise TypeError(
            f"checkpoint_modules needs nn.Module subclasses; got {types!r}, "
            "e.g. checkpoint_modules(model, (nn.TransformerEncoderLayer,))"
        )
    return types


def checkpoint_modules(model: nn.Module, types: Any) -> list[str]:
    """Checkpoint every module of the given types (outermost only); returns their names.

    Each matched module's forward runs under `torch.utils.checkpoint` with `use_reentrant=False`.
    Modules nested inside a matched one are left alone (checkpointing twice only recomputes more).
    Calling it again is harmless: already checkpointed modules are skipped.
    """
    types = _check_types(types)
    wrapped: list[str] = []
    skip_prefixes: list[str] = []
    for name, module in model.named_modules():
        if any(name.startswith(prefix) for prefix in skip_prefixes):
            continue
        if not isinstance(module, types):
            continue
        skip_prefixes.append(f"{name}." if name else "")
        if getattr(module, _MARK, False):
            continue
        # An instance attribute shadows the class's forward; nn.Module.__call__ looks it up.
        module.forward = functools.partial(_checkpointed, module.forward)  # type: ignore[method-assign]
        setattr(module, _MARK, True)
        wrapped.append(name)
    if not wrapped and not any(getattr(m, _MARK, False) for m in model.modules()):
        names = ", ".join(t.__name__ for t in types)
        raise ValueError(
            f"checkpoint_modules found no module of type {names} in {type(model).__name__}; "
            "pass the block class the model repeats (e.g. its transformer layer)"
        )
    return wrapped
