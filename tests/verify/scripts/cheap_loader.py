"""A small conv net on cheap in-memory samples: on a CPU with few cores workers do not pay.

python cheap_loader.py [--workers N]
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.set_num_threads(1)  # steady timings on a shared machine
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(2048, 1, 28, 28, generator=g), torch.randint(0, 10, (2048,)))
    loader = DataLoader(data, batch_size=64, num_workers=args.workers)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(8 * 14 * 14, 10),
    )  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
