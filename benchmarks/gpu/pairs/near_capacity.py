"""Training with GPU memory near capacity, then with the headroom back: `memory-pressure`.

    python benchmarks/gpu/pairs/near_capacity.py --out DIR
    python benchmarks/gpu/pairs/near_capacity.py --out DIR --size tiny --device cpu

A common way to get there: something else lives on the same GPU for the whole run (a frozen
teacher or reference model, a cache, a second job). Here a ballast tensor stands in for it and
leaves free only 1.25x what the training step itself needs at its peak. The step's batch is sized
so that its activations take about a tenth of the device (whatever its size: an H100 or an H200),
and the batch size cycles (3/4, 1/4, all, 1/2 of it), so memory comes and goes near the limit: the
rule's "pressure" case, not its "pool reserved by design" case (tensors holding over 95% of the
reserved memory throughout). With no room to grow, the caching allocator frees its cache and
retries (`alloc_retries_count` in pair.json). The fix: the ballast is gone.

The rule gives no saving estimate (pressure costs retries and out-of-memory risk, not a fixed
time per step): only "fires before, silent after" is judged; the measured difference is shown.
Allocation only: the ballast is never written (plain cudaMalloc through the caching allocator).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from _pair import Pair, main
from torch import nn

# (batch, width, layers); on the GPU the batch is sized from the device's memory instead
SIZES = {"tiny": (64, 64, 2), "gpu": (0, 256, 4)}
ACTIVATIONS = 0.10  # of the device's memory: the step's own peak, for the largest batch
HEADROOM = 1.25  # free memory the ballast leaves, in units of that peak
PROBE = 8192  # rows of the probe step that the largest batch is scaled from


def _step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def _peak(
    device: torch.device, model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor
) -> int:
    """Bytes one step on `x` needs above what is allocated before it."""
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    _step(model, opt, x)
    return torch.cuda.max_memory_allocated(device) - base


def _largest_batch(
    device: torch.device, model: nn.Module, opt: torch.optim.Optimizer, width: int
) -> int:
    """Rows whose step peaks at about ACTIVATIONS of the device (a probe step, scaled)."""
    probe = _peak(device, model, opt, torch.randn(PROBE, width, device=device))
    total = torch.cuda.mem_get_info(device)[1]
    return max(PROBE, int(PROBE * ACTIVATIONS * total / max(probe, 1)))


def _ballast(device: torch.device, peak: int) -> torch.Tensor:
    """All free device memory but HEADROOM x one largest step's peak."""
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(device)
    return torch.empty(max(int(free - HEADROOM * peak), 0), dtype=torch.uint8, device=device)


def train(device: torch.device, size: str, fixed: bool) -> Iterator[None]:
    largest, width, layers = SIZES[size]
    torch.manual_seed(0)
    model = nn.Sequential(
        *[nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(layers)]
    )
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ballast = None
    if device.type == "cuda":  # the same batch and steps before and after; only the ballast differs
        largest = _largest_batch(device, model, opt, width)
        peak = _peak(device, model, opt, torch.randn(largest, width, device=device))
        if not fixed:
            ballast = _ballast(device, peak)
    data = torch.randn(largest, width, device=device)
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
