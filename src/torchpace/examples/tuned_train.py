"""The same model and data as naive_train.py, with every fix `torchpace doctor` suggests.

    torchpace doctor examples/tuned_train.py --epochs 1
    torchpace doctor -m torchpace.examples.tuned_train --epochs 1   (from a pip install)

Fixes, each marked `# FIX:`. Two of them change numerics and say so: bf16 autocast (on GPUs with
bf16 tensor cores, and CPUs with AMX; fp16 on GPUs before Ampere) and TF32 matmuls on Ampere or
newer GPUs.
"""

import argparse

import torch
from torch import nn
from torch.utils.data import Dataset

from torchpace.data import DevicePrefetcher, fast_loader, set_epoch
from torchpace.train import Precision


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
    # FIX: no bias before BatchNorm (its mean subtraction removes it anyway).
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())  # fmt: skip


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
    parser.add_argument("--log-every", type=int, default=20)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # FIX: no anomaly detection. On GPUs: cuDNN autotuning for fixed shapes, TF32 matmuls.
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.set_float32_matmul_precision("high")  # changes numerics: TF32 (10-bit mantissa)

    # FIX: workers from the cores per rank, pin_memory only with a GPU, persistent workers.
    loader = fast_loader(SyntheticImages(args.samples), batch_size=args.batch_size, shuffle=True)
    # FIX: a plain module (DDP under torchrun for several GPUs), channels_last on the GPU.
    model = make_model().to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    # FIX: torch.amp autocast in the precision the doctor prescribes for this device (bf16/fp16/fp32).
    precision = Precision("auto", device)
    print(f"precision: {precision.mode} ({precision.reason})")
    # FIX: constants made once, on the device.
    weights = torch.ones(10, device=device)

    step = 0
    running = torch.zeros((), device=device)
    for epoch in range(args.epochs):
        set_epoch(loader, epoch)
        # FIX: batches copied one ahead on a side stream (a no-op pass-through on the CPU).
        for x, y in DevicePrefetcher(loader, device):
            with precision.autocast():
                logits = model(x)
                loss = nn.functional.cross_entropy(logits, y, weight=weights)
            opt.zero_grad(set_to_none=True)
            precision.backward(loss)
            precision.step(opt)

            # FIX: accuracy from the training logits, without another forward or autograd.
            with torch.no_grad():
                running += loss.detach()
                acc = (logits.argmax(1) == y).float().mean()
            step += 1
            if step % args.log_every == 0:  # FIX: one host sync per log_every steps
                print(f"epoch {epoch} step {step} loss {running.item() / args.log_every:.3f} "
                      f"acc {acc.item():.2f}")  # fmt: skip
                running.zero_()
            if step == args.steps:
                return


if __name__ == "__main__":
    main()
