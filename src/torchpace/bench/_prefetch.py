"""Plain-torch stand-in for torchpace.data.DevicePrefetcher (replaced once it lands)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch

from torchpace.bench.loader import to_device


def prefetch(batches: Iterable[Any], device: torch.device) -> Iterator[Any]:
    stream = torch.cuda.Stream(device)
    it = iter(batches)

    def load() -> Any:
        try:
            b = next(it)
        except StopIteration:
            return None
        with torch.cuda.stream(stream):
            return to_device(b, device, True)

    nxt = load()
    while nxt is not None:
        torch.cuda.current_stream(device).wait_stream(stream)
        cur = nxt
        nxt = load()
        yield cur
