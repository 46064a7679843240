"""fp32 matmuls with TF32 off (PyTorch's default since 1.12), then on: `tf32-disabled`.

    python benchmarks/gpu/pairs/tf32.py --out DIR            # CUDA: the recording
    python benchmarks/gpu/pairs/tf32.py --out DIR --size tiny --device cpu   # rehearsal

An fp32 MLP whose step is nearly all GEMMs, so TF32's gain shows in the step time. The fix changes
the math (a 10-bit mantissa for the products): the loss curve is the thing to compare, not bits.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from _pair import Pair, main
from torch import nn

# (batch, width, layers): gpu makes each GEMM 4096x4096x4096 (~10 ms of fp32 per layer, fwd+bwd)
SIZES = {"tiny": (64, 128, 2), "gpu": (4096, 4096, 4)}


def train(device: torch.device, size: str, fixed: bool) -> Iterator[None]:
    batch, width, layers = SIZES[size]
    torch.manual_seed(0)
    was = torch.get_float32_matmul_precision()
    # "high": fp32 matmuls may use TF32 tensor cores; "highest" (the default) keeps full fp32.
    torch.set_float32_matmul_precision("high" if fixed else "highest")
    try:
        model = nn.Sequential(
            *[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(layers)]
        )
        model = model.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x = torch.randn(batch, width, device=device)
        target = torch.randn(batch, width, device=device)
        while True:
            loss = nn.functional.mse_loss(model(x), target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            yield
    finally:
        torch.set_float32_matmul_precision(was)


PAIR = Pair("tf32", "tf32-disabled", "fp32 matmuls on CUDA cores -> TF32 tensor cores", train)

if __name__ == "__main__":
    raise SystemExit(main(PAIR))
