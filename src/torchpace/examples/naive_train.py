"""A naive image-classification training loop: correct, but slow in ways `torchpace doctor` finds.

    torchpace doctor examples/naive_train.py --epochs 1     (or: make demo)
    torchpace doctor -m torchpace.examples.naive_train --epochs 1   (from a pip install)

Synthetic data (generated, nothing downloaded). Each smell is marked `# SMELL:`; the same model with
every fix is examples/tuned_train.py. On a CPU-only machine the doctor sees those not marked (GPU);
those (mixed precision, TF32, cudnn.benchmark, per-step syncs, host-made tensors) need a GPU.
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SyntheticImages(Dataset):
    """Random 3x32x32 images with 10 classes, "decoded" and augmented per item like real data."""

    def __init__(self, n: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randint(0, 256, (n, 32, 32, 3), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.images[i].permute(2, 0, 1).float() / 255.0  # HWC uint8 -> CHW float
        if torch.rand(()) < 0.5:
            x = x.flip(-1)  # random horizontal flip
        x = (x - 0.5) / 0.25
        return x, self.labels[i]


def block(cin: int, cout: int) -> nn.Sequential:
    # SMELL: conv-bias-before-bn: the bias is cancelled by BatchNorm's mean subtraction.
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


def make_model() -> nn.Module:
    return nn.Sequential(
        block(3, 32), block(32, 32), nn.MaxPool2d(2),
        block(32, 64), block(64, 64), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 10),
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    # SMELL: debug-api-enabled: anomaly detection left on from a debugging session.
    torch.autograd.set_detect_anomaly(True)

    # SMELL: dataloader-stall when building batches in the training process (num_workers=0)
    # stalls it (on this small model the doctor may find the stall too short to matter).
    loader = DataLoader(SyntheticImages(args.samples), batch_size=args.batch_size, shuffle=True,
                        num_workers=0, pin_memory=device == "cuda")  # fmt: skip
    # SMELL: data-parallel: nn.DataParallel instead of DDP (and around a single device here).
    model = nn.DataParallel(make_model().to(device))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    step = 0
    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)  # pageable copies, not non_blocking
            # SMELL: host-tensor-creation (GPU): class weights rebuilt on the host every step.
            weights = torch.tensor([1.0] * 10).to(device)
            # SMELL: deprecated-api: torch.cuda.amp.autocast; and fp32 on the GPU (no autocast).
            with torch.cuda.amp.autocast(enabled=False):
                loss = nn.functional.cross_entropy(model(x), y, weight=weights)
            opt.zero_grad()
            loss.backward()
            opt.step()

            # SMELL: grad-in-eval: accuracy from a second forward that records autograd.
            model.eval()
            acc = (model(x).argmax(1) == y).float().mean()
            model.train()
            # SMELL: sync-point (GPU): .item() every step waits for the GPU.
            print(f"epoch {epoch} step {step} loss {loss.item():.3f} acc {acc.item():.2f}")
            step += 1
            if step == args.steps:
                return


if __name__ == "__main__":
    main()
