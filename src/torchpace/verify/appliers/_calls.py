"""Wrap the outermost nn.Module call (the model's forward as the script calls it), once per fix.

Nested calls (the model's own layers) pass straight through: a fix decides on the call the script
made, e.g. `model(x)` after model.eval(), not on a BatchNorm its parent put in eval mode.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

# around(module, args, kwargs, call, caller) -> output; `call(*args, **kwargs)` runs the forward.
Around = Callable[[Any, tuple[Any, ...], dict[str, Any], Callable[..., Any], FrameType], Any]


def wrap_outer_calls(around: Around) -> None:
    """Patch torch.nn.Module.__call__ so that `around` runs for each outermost module call."""
    import torch

    original = torch.nn.Module.__call__
    state = threading.local()

    @functools.wraps(original)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(state, "inside", False):
            return original(self, *args, **kwargs)
        state.inside = True
        try:
            return around(
                self, args, kwargs, lambda *a, **k: original(self, *a, **k), sys._getframe(1)
            )
        finally:
            state.inside = False

    torch.nn.Module.__call__ = call  # type: ignore[method-assign]


def keep(owner: Any, name: str, value: Any) -> None:
    """Set `owner.name = value` and make the script's own later calls of that setter keep it.

    `owner.name` must be a function-like setter (torch.set_num_threads): the replacement takes
    any arguments the installed torch passes and sets `value` instead.
    """
    original = getattr(owner, name)
    original(value)

    @functools.wraps(original)
    def setter(*args: Any, **kwargs: Any) -> Any:
        return original(value)

    setattr(owner, name, setter)
