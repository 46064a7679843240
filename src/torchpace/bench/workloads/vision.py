"""`vision`: a ResNet-style net on synthetic CIFAR-shaped uint8 images, augmented on the host."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from torchpace.bench.workloads.base import Workload, has_convolutions, parameter_count

# CIFAR-10 channel statistics: the normalisation a real CIFAR pipeline applies on the host.
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


@dataclass(frozen=True)
class VisionSize:
    """Model width/depth and batch shape for one size of the vision workload."""

    widths: tuple[int, ...]
    blocks: int
    batch_size: int
    epoch_batches: int
    num_classes: int = 10


SIZES = {
    "tiny": VisionSize(widths=(4, 8), blocks=1, batch_size=8, epoch_batches=3),
    "small": VisionSize(widths=(16, 32, 64), blocks=1, batch_size=64, epoch_batches=8),
    # ResNet-18 widths and depth on 32x32 inputs: the GPU recipe.
    "full": VisionSize(widths=(64, 128, 256, 512), blocks=2, batch_size=256, epoch_batches=20),
}


class SyntheticImages(Dataset[tuple[torch.Tensor, int]]):
    """Random uint8 HWC images with labels; __getitem__ crops, flips and normalises like CIFAR."""

    def __init__(self, n: int, num_classes: int = 10, seed: int = 0, size: int = 32) -> None:
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randint(0, 256, (n, size, size, 3), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        self.seed = seed
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        # Seeded by index, not by process: workers or not, every configuration sees the same
        # pixels, so loss parity against the baseline is exact.
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        image = self.images[index].permute(2, 0, 1).float().div_(255.0)
        padded = F.pad(image.unsqueeze(0), (4, 4, 4, 4), mode="reflect").squeeze(0)
        top, left = torch.randint(0, 9, (2,), generator=g).tolist()
        size = image.shape[-1]
        image = padded[:, top : top + size, left : left + size]
        if torch.rand((), generator=g).item() < 0.5:
            image = image.flip(-1)
        image = (image - self.mean) / self.std
        return image.contiguous(), int(self.labels[index])


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a residual connection."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    """A CIFAR ResNet: 3x3 stem, stages of basic blocks, global pooling, a linear head."""

    def __init__(self, widths: tuple[int, ...], blocks: int, num_classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()
        )
        layers: list[nn.Module] = []
        cin = widths[0]
        for i, width in enumerate(widths):
            for j in range(blocks):
                layers.append(BasicBlock(cin, width, 2 if i > 0 and j == 0 else 1))
                cin = width
        # One flat Sequential of blocks: what activation checkpointing wraps.
        self.blocks = nn.Sequential(*layers)
        self.head = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build(size: str = "small", seed: int = 0) -> Workload:
    """The vision workload at one size: "tiny" (tests), "small" (CPU), "full" (GPU)."""
    spec = SIZES[size]

    def build_model() -> nn.Module:
        return ResNet(spec.widths, spec.blocks, spec.num_classes)

    probe = build_model()
    n = spec.batch_size * spec.epoch_batches
    return Workload(
        name="vision",
        build_model=build_model,
        dataset=SyntheticImages(n, spec.num_classes, seed),
        loss=F.cross_entropy,
        batch_size=spec.batch_size,
        unit="samples",
        has_convolutions=has_convolutions(probe),
        epoch_batches=spec.epoch_batches,
        description=f"ResNet-style net, synthetic 32x32 uint8 images, crop/flip/normalise on the host ({size})",
        facts={
            "size": size,
            "parameters": parameter_count(probe),
            "batch_size": spec.batch_size,
            "image": "3x32x32 uint8",
            "dataset_samples": n,
        },
    )
