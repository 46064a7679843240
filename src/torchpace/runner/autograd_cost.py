"""What autograd costs an evaluation forward: the same batch timed with and without it.

Under --follow, an evaluation pass that records graphs (grad-in-eval) keeps one of its batches.
Once the script has ended, the model runs that batch in eval mode, with autograd on and under
torch.no_grad(), in alternating pairs (the machine's load hits both alike); the medians' gap is
what each eval forward would save. Each module's train/eval flag is put back.
"""

from __future__ import annotations

import time
from typing import Any

from torchpace.trace.stats import median

PAIRS = 5
BUDGET_S = 5.0  # the pairs stop early past this (a big model's forward)
METHOD = (
    "median of {pairs} alternating pairs of eval-mode forwards of the model on one of the run's "
    "own evaluation batches, with autograd on and under torch.no_grad(), timed after the script "
    "ended"
)


def forward_ms(model: Any, args: Any, kwargs: Any) -> tuple[tuple[float, float] | None, str]:
    """One forward's median time (ms) with autograd on and under no_grad (None: could not run),
    and how it was measured."""
    import torch

    model = getattr(model, "module", model) if _wrapper(model) else model
    if _wrapper(model) or "FullyShardedDataParallel" in type(model).__name__:
        # Its forward runs collectives: on one rank alone, after the others ended, it would hang.
        return None, f"a {type(model).__name__} forward needs every rank"
    flags = [(m, m.training) for m in model.modules()]
    on: list[float] = []
    off: list[float] = []
    try:
        model.eval()
        _timed(model, args, kwargs, grad=True)  # warm: lazy buffers, allocator, kernels
        deadline = time.perf_counter() + BUDGET_S
        while len(on) < PAIRS and time.perf_counter() < deadline:
            on.append(_timed(model, args, kwargs, grad=True))
            off.append(_timed(model, args, kwargs, grad=False))
    except Exception as exc:  # the batch no longer fits the model, out of memory
        return None, f"the eval batch could not be run again ({type(exc).__name__})"
    finally:
        for module, training in flags:
            module.training = training
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    medians = (median(on) * 1000.0, median(off) * 1000.0)
    return medians, METHOD.format(pairs=len(on))


def _timed(model: Any, args: Any, kwargs: Any, *, grad: bool) -> float:
    """One forward's wall time, its graph freed (the device drained on both sides)."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_initialized() else (lambda: None)
    sync()
    began = time.perf_counter()
    with torch.set_grad_enabled(grad):
        out = model(*args, **(kwargs or {}))
        sync()
        del out  # freeing the graph is part of what autograd costs
    return time.perf_counter() - began


def _wrapper(model: Any) -> bool:
    """DistributedDataParallel / DataParallel: the model inside runs alone, without collectives."""
    return type(model).__name__ in ("DistributedDataParallel", "DataParallel")
