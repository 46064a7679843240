"""A DataLoader that augments in the training process, then workers + pinned memory + the device
prefetcher + persistent workers (the "001" recipe): `dataloader-stall`.

    python benchmarks/gpu/pairs/loader_stall.py --out DIR
    python benchmarks/gpu/pairs/loader_stall.py --out DIR --size tiny --device cpu

Synthetic CIFAR-shaped uint8 images cropped, flipped and normalised per sample on the host (the
bench's vision dataset); a small conv net that the GPU finishes long before the next batch is
ready. The fix is torchpace's own: `fast_loader` (workers from the cores, pin_memory, persistent
workers, prefetch_factor 4) and `DevicePrefetcher` (the copy one batch ahead on a side stream).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from _pair import Pair, main
from torch import nn
from torch.utils.data import DataLoader

from torchpace.bench.workloads.vision import SyntheticImages
from torchpace.data import DevicePrefetcher, fast_loader

# (batch, batches per epoch, conv width)
SIZES = {"tiny": (16, 4, 8), "gpu": (128, 16, 64)}


def _model(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
        nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10),
    )  # fmt: skip


def train(device: torch.device, size: str, fixed: bool) -> Iterator[None]:
    batch, batches, width = SIZES[size]
    torch.manual_seed(0)
    data = SyntheticImages(batch * batches, seed=0)
    if fixed:
        loader: DataLoader = fast_loader(data, batch_size=batch, shuffle=True)
    else:
        loader = DataLoader(data, batch_size=batch, shuffle=True)  # num_workers=0, pageable
    model = _model(width).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    try:
        while True:
            # The prefetcher is a pass-through on the CPU; on CUDA it copies one batch ahead.
            batches_on_device = DevicePrefetcher(loader, device) if fixed else loader
            for x, y in batches_on_device:
                x, y = x.to(device), y.to(device)  # a no-op for the prefetcher's batches
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                yield
    finally:
        iterator = getattr(loader, "_iterator", None)
        if iterator is not None:  # persistent workers: end them now, not at garbage collection
            iterator._shutdown_workers()


PAIR = Pair(
    "loader_stall",
    "dataloader-stall",
    "num_workers=0 on host-augmented images -> fast_loader + DevicePrefetcher",
    train,
)

if __name__ == "__main__":
    raise SystemExit(main(PAIR))
