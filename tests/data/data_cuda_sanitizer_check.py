"""Run with TORCH_CUDA_SANITIZER=1: the prefetcher's results equal a plain loader's, race-free.

CSAN raises on any unsynchronised cross-stream access, so a missing wait or record_stream in the
prefetcher fails this script (exit code != 0).
"""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from torchpace.data import DevicePrefetcher


def _step(batch: dict) -> torch.Tensor:
    x = batch["x"].float() / 255
    return (x @ x.transpose(-1, -2)).sum() + batch["y"].float().sum()


def main() -> None:
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 255, (64, 64, 64), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, 10, (64,), generator=generator)
    loader = DataLoader(
        TensorDataset(images, labels),
        batch_size=8,
        pin_memory=True,
        collate_fn=lambda items: {
            "x": torch.stack([i[0] for i in items]),
            "y": torch.stack([i[1] for i in items]),
        },
    )
    plain = [_step({k: v.cuda() for k, v in batch.items()}).item() for batch in loader]
    for _ in range(3):
        fetched = [_step(batch).item() for batch in DevicePrefetcher(loader, "cuda")]
        assert fetched == plain, (fetched, plain)
    print("OK")


if __name__ == "__main__":
    main()
