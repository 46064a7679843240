"""A tiny model fed by a Dataset that sleeps 20 ms per sample (a slow disk): workers help.

python sleepy_loader.py [--workers N] [--anomaly]
"""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Sleepy(Dataset):
    def __len__(self) -> int:
        return 400

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(0.02)  # waiting on I/O: no CPU used
        return torch.full((32,), float(i % 7)), torch.tensor(i % 2)


def main() -> None:
    torch.set_num_threads(1)  # steady timings on a shared machine
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--anomaly", action="store_true")
    args = parser.parse_args()
    torch.autograd.set_detect_anomaly(args.anomaly)
    loader = DataLoader(Sleepy(), batch_size=4, num_workers=args.workers)
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
