"""TorchScript classes: torch.distributed.optim scripts its functional optimizers at import, and
this script scripts a class that calls a module-level function (resolved from the caller's frame),
and a function that calls `warnings.warn`, an op to TorchScript (PyG's examples/jit/gin.py)."""

import warnings

import torch
import torch.distributed.optim  # TorchScripts classes at import
from _data import dataset, model
from torch.utils.data import DataLoader


def scale_by(x: torch.Tensor, k: float) -> torch.Tensor:
    return x * k


@torch.jit.script
class Scaler:
    def __init__(self, k: float) -> None:
        self.k = k

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        return scale_by(x, self.k)


@torch.jit.script
def finite(x: torch.Tensor) -> torch.Tensor:
    if bool(x.isnan().any()):
        warnings.warn("a NaN in the logits", stacklevel=2)
    return x


scaler = Scaler(1.0)
net = model()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _epoch in range(3):
    for x, y in DataLoader(dataset(), batch_size=16):
        loss = torch.nn.functional.cross_entropy(finite(scaler.apply(net(x))), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
print("STAGE torchscript done")
