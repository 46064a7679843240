"""Find the largest batch that fits in memory, and rescale the learning rate for it.

The search only ever returns a size that ran. Under DDP every rank runs the same trials and the
failure flag is all-reduced (MAX), so all ranks agree even when one of them ran out of memory.
"""

from __future__ import annotations

import builtins
import gc
import math
import traceback
from collections.abc import Callable
from typing import Any, Literal

import torch

from torchpace.dist.setup import any_rank

# Messages the CUDA/ROCm/MPS/CPU allocators and cuBLAS/cuDNN raise when memory runs out.
_OOM_MESSAGES = (
    "out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "DefaultCPUAllocator: can't allocate memory",
)


def is_oom(error: BaseException) -> bool:
    """True for torch.OutOfMemoryError and the RuntimeError variants that mean the same."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and any(m in str(error) for m in _OOM_MESSAGES)


def release_memory() -> None:
    """Free what a failed trial left: Python garbage first, then the CUDA allocator's cache."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _fits(trial: Callable[[int], Any], size: int, passed: set[int]) -> bool:
    failed = False
    try:
        trial(size)
    except Exception as error:  # only OOM is a verdict; anything else is the user's bug
        if not is_oom(error):
            raise
        failed = True
        # The traceback's frames hold the failed trial's tensors, and the error can outlive this
        # block (a trial that keeps or re-raises it, a logger): clear their locals now.
        traceback.clear_frames(error.__traceback__)
    if failed:
        release_memory()
    failed = any_rank(failed)
    if not failed:
        passed.add(size)
    return not failed


def _validate(start: int, max: int, margin: float, multiple_of: int) -> None:
    for name, value in (("start", start), ("max", max), ("multiple_of", multiple_of)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"find_batch_size: {name} must be a whole number >= 1; got {value!r}")
    if max < start:
        raise ValueError(f"find_batch_size: max ({max}) is below start ({start}); raise max")
    if not 0 <= margin < 1:
        raise ValueError(f"find_batch_size: margin must be in [0, 1); got {margin!r}, e.g. 0.05")


def _largest_passing(trial: Callable[[int], Any], start: int, max: int, passed: set[int]) -> int:
    lo = start
    while not _fits(trial, lo, passed):
        if lo == 1:
            raise RuntimeError(
                "find_batch_size: even batch size 1 runs out of memory; shrink the model's "
                "footprint first (Precision('bf16'), checkpoint_modules) or use a bigger device"
            )
        lo //= 2  # the start itself did not fit: search downwards
    hi = None  # smallest size known to fail above lo
    while hi is None and lo < max:
        nxt = min(lo * 2, max)
        if _fits(trial, nxt, passed):
            lo = nxt
        else:
            hi = nxt
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if _fits(trial, mid, passed):
            lo = mid
        else:
            hi = mid
    return lo


def _backed_off(largest: int, margin: float, multiple_of: int) -> int:
    target = max(1, math.floor(largest * (1 - margin)))
    if target >= multiple_of:
        target -= target % multiple_of
    return target


def find_batch_size(
    trial: Callable[[int], Any],
    *,
    start: int,
    max: int,
    margin: float = 0.05,
    multiple_of: int = 8,
) -> int:
    """The largest batch size that fits, less a safety margin; always a size that ran.

    `trial(batch_size)` runs one full training step (forward, backward, optimizer step) on a
    batch of that size; it fails by raising an out-of-memory error. The search doubles from
    `start` (halving first if `start` fails) until a size fails or `max` passes, then bisects.
    From the largest passing size L it backs off to floor(L * (1 - margin)), rounded down to a
    multiple of `multiple_of` when at least that big (tensor cores favour multiples of 8), and
    runs that size too. If it fails (memory use is not always monotone in the batch size), the
    answer is the largest size below it that passed, else the smallest that passed.
    Under DDP, call it on every rank with a trial on the bare (unwrapped) model: an OOM inside
    DDP's own all-reduce would leave the other ranks waiting.
    """
    _validate(start, max, margin, multiple_of)
    passed: set[int] = set()
    largest = _largest_passing(trial, start, max, passed)
    target = _backed_off(largest, margin, multiple_of)
    if target in passed or _fits(trial, target, passed):
        return target
    below = [size for size in passed if size < target]
    # builtins.max: the parameter named max shadows the builtin here.
    return builtins.max(below) if below else min(passed)


def scale_lr(
    lr: float, old_batch: int, new_batch: int, rule: Literal["linear", "sqrt"] = "linear"
) -> float:
    """The learning rate for `new_batch`, given one tuned for `old_batch`.

    "linear" (Goyal et al. 2017, for SGD): lr * new/old. "sqrt" (Krizhevsky 2014; common for
    Adam): lr * sqrt(new/old). Either is a starting point for tuning, not a guarantee.
    """
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"scale_lr: lr must be a finite number > 0; got {lr!r}")
    for name, value in (("old_batch", old_batch), ("new_batch", new_batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"scale_lr: {name} must be a whole number >= 1; got {value!r}")
    if rule == "linear":
        return lr * new_batch / old_batch
    if rule == "sqrt":
        return lr * math.sqrt(new_batch / old_batch)
    raise ValueError(f"scale_lr: rule must be 'linear' or 'sqrt'; got {rule!r}")
