"""Count the FLOPs of one training step with torch.utils.flop_counter (matmuls, convs, attention)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.utils.flop_counter import FlopCounterMode


def count_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Run `fn(*args, **kwargs)` once and return the FLOPs it dispatched (forward and backward).

    Count a step you would run anyway (it really runs, optimizer step included). Only matmul-like
    ops are counted, which is what MFU uses. With activation checkpointing on, recomputed forwards
    are counted too: that gives hardware FLOPs utilisation rather than model FLOPs utilisation.
    """
    with FlopCounterMode(display=False) as counter:
        fn(*args, **kwargs)
    return int(counter.get_total_flops())
