"""Smell: every epoch, each image is decompressed and resized again (the same result each time)."""

import zlib

import numpy as np
import torch
from _common import steps_from_argv
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


class Encoded(Dataset):
    """Images kept compressed, decoded and resized on each read: a stand-in for JPEG files."""

    def __init__(self, n: int = 64) -> None:
        g = np.random.default_rng(0)
        self.blobs = [
            zlib.compress(g.integers(0, 256, (3, 128, 128), np.uint8).tobytes()) for _ in range(n)
        ]

    def __len__(self) -> int:
        return len(self.blobs)

    def decode(self, i: int) -> torch.Tensor:
        raw = np.frombuffer(zlib.decompress(self.blobs[i]), np.uint8).reshape(1, 3, 128, 128)
        x = torch.from_numpy(raw.copy()).float() / 255
        return F.interpolate(x, size=(32, 32), mode="bilinear", antialias=True)[0]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.decode(i), i % 10


def train(dataset: Dataset) -> None:
    """A small classifier over the 3x32x32 images, for --iters batches over several epochs, on one
    thread (the same shares of work on a quiet and a busy machine)."""
    torch.set_num_threads(1)
    loader = DataLoader(dataset, batch_size=16, shuffle=True)
    model = nn.Sequential(
        nn.Flatten(), nn.Linear(3 * 32 * 32, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    while steps < steps_from_argv():
        for x, y in loader:  # 4 batches an epoch: the same images come back every 4 steps
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1


if __name__ == "__main__":
    train(Encoded())
