"""bf16 GEMMs whose dimensions are not multiples of 8, then padded: `tensor-core-unfriendly-shape`.

    python benchmarks/gpu/pairs/tensor_shapes.py --out DIR
    python benchmarks/gpu/pairs/tensor_shapes.py --out DIR --size tiny --device cpu

The same MLP under bf16 autocast twice: widths like 4090 and an output of 1001 classes (rows that
cuBLAS can only load 2 bytes at a time), then each padded up to a multiple of 64, as nanoGPT pads
its vocabulary. The padded model does a little more arithmetic and should still be faster.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from _pair import Pair, main
from torch import nn

# (batch, input, hidden, classes) before the fix; the fix pads every feature size to 64
SIZES = {"tiny": (64, 100, 250, 10), "gpu": (8192, 1022, 4090, 1001)}


def _pad(n: int, to: int = 64) -> int:
    return (n + to - 1) // to * to


def train(device: torch.device, size: str, fixed: bool) -> Iterator[None]:
    batch, features, hidden, classes = SIZES[size]
    if fixed:
        # Padded inputs are zeros and padded classes are never a label: the same task.
        features, hidden, classes = _pad(features), _pad(hidden), _pad(classes)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(features, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
        nn.Linear(hidden, classes),
    ).to(device)  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, features, device=device)
    y = torch.randint(0, SIZES[size][3], (batch,), device=device)
    while True:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        yield


PAIR = Pair(
    "tensor_shapes",
    "tensor-core-unfriendly-shape",
    "bf16 GEMMs with dims 1022/4090/1001 -> padded to multiples of 64",
    train,
)

if __name__ == "__main__":
    raise SystemExit(main(PAIR))
