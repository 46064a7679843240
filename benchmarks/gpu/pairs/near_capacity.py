"""Training with GPU memory near capacity, then with the headroom back: `memory-pressure`.

    python benchmarks/gpu/pairs/near_capacity.py --out DIR
    python benchmarks/gpu/pairs/near_capacity.py --out DIR --size tiny --device cpu

A common way to get there: something else lives on the same GPU for the whole run (a frozen
teacher or reference model, a cache, a second job). Here a ballast tensor stands in for it and
leaves about 1.25x the step's own peak free; the batch size varies from step to step (a seeded
cycle of sizes), so the caching allocator keeps needing blocks of new sizes and, with no room to
grow, frees its cache and retries (num_alloc_retries). The fix: the ballast is gone. The rule
gives no saving estimate (pressure costs retries and out-of-memory risk, not a fixed time):
the measured difference is recorded beside it.

Allocation only: the ballast is never written (plain cudaMalloc through the caching allocator).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from _pair import Pair, main
from torch import nn

# (largest batch, width, layers); batches cycle through 1/4, 1/2, 3/4 and all of the largest
SIZES = {"tiny": (64, 64, 2), "gpu": (16384, 2048, 4)}
HEADROOM = 1.25  # free memory left by the ballast, in units of the step's own peak


def _step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def _ballast(
    device: torch.device, model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor
) -> torch.Tensor | None:
    """Take all free device memory but HEADROOM x one largest step's peak (None on the CPU)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    _step(model, opt, x)  # the largest batch, once, to measure its peak
    peak = torch.cuda.max_memory_allocated(device) - base
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(device)
    size = int(free - HEADROOM * peak)
    return torch.empty(max(size, 0), dtype=torch.uint8, device=device)


def train(device: torch.device, size: str, fixed: bool) -> Iterator[None]:
    largest, width, layers = SIZES[size]
    torch.manual_seed(0)
    model = nn.Sequential(
        *[nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(layers)]
    )
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randn(largest, width, device=device)
    ballast = None if fixed else _ballast(device, model, opt, data)
    sizes = [largest * k // 4 for k in (3, 1, 4, 2)]
    try:
        step = 0
        while True:
            _step(model, opt, data[: sizes[step % len(sizes)]])
            step += 1
            yield
    finally:
        del ballast  # the harness empties the cache after each variant


PAIR = Pair(
    "near_capacity",
    "memory-pressure",
    "a resident ballast leaves 1.25x the step's peak free -> the headroom back",
    train,
)

if __name__ == "__main__":
    raise SystemExit(main(PAIR))
