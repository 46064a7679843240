"""What one torch.save wrote, and what a background save would still cost the loop (--follow)."""

from __future__ import annotations

import os
import time
from typing import Any


def tell(f: Any) -> int | None:
    if isinstance(f, (str, os.PathLike)):
        return None
    try:
        return int(f.tell())
    except Exception:  # not seekable: bytes unknown
        return None


def written(f: Any, at: int | None) -> int:
    """Bytes one save wrote: the file's size, or how far a file object moved."""
    try:
        if isinstance(f, (str, os.PathLike)):
            return os.path.getsize(f)
        return int(f.tell()) - at if at is not None else 0
    except Exception:  # removed meanwhile, or not seekable
        return 0


def copy_rate(nbytes: int) -> float | None:
    """This machine's host copy rate (bytes/s): one copy of up to 64 MiB, what a background save
    still pays in the training loop (its CPU copy of the state)."""
    import torch

    size = max(1 << 20, min(nbytes, 64 << 20))
    try:
        src = torch.empty(size, dtype=torch.uint8)
        dst = torch.empty_like(src)
        dst.copy_(src)  # first touch: pages mapped
        began = time.perf_counter()
        dst.copy_(src)
        took = time.perf_counter() - began
    except Exception:  # no memory to spare: no rate
        return None
    return size / took if took > 0 else None
