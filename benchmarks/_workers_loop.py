"""The loop bench_measure_workers.py runs in a fresh process per measured run (argv: DATA WORKERS)."""

from __future__ import annotations

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from torchpace.measure.process import window_from_env, write_steps


class Images(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, n: int, wait_s: float) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (n, 1, 28, 28), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        self.wait_s = wait_s

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.wait_s:
            time.sleep(self.wait_s)
        return self.images[i].float().div(255.0).sub(0.1307).div(0.3081), self.labels[i]


def main() -> None:
    data, workers = sys.argv[1], int(sys.argv[2])
    warmup, steps = window_from_env() or (5, 30)
    torch.manual_seed(0)
    dataset = Images(64 * (warmup + steps), 0.001 if data == "waits" else 0.0)
    loader = DataLoader(dataset, batch_size=64, num_workers=workers, persistent_workers=workers > 0)
    net = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10),
    )  # fmt: skip
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    times, last = [], time.perf_counter()
    for x, y in loader:  # a step: waiting for the batch, forward, backward, update
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        now = time.perf_counter()
        times.append((now - last) * 1000.0)
        last = now
    write_steps(times[warmup:])


if __name__ == "__main__":
    main()
