"""The user guide's loop, end to end on CPU: every piece together, compile included."""

from __future__ import annotations

import io

import torch
from torch import nn

from torchpace import dist
from torchpace.monitor import Throughput, count_flops, progress
from torchpace.train import (
    Precision,
    TrainStep,
    apply_speedups,
    checkpoint_modules,
    warmup_memory,
)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.fc(x))


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), Block(), Block(), nn.Linear(16, 3))


def _train(*, fast: bool, monkeypatch) -> list[torch.Tensor]:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    where = dist.init()
    model = _model()
    applied = None
    if fast:
        checkpoint_modules(model, Block)
        applied = apply_speedups(model, compile={"backend": "eager"})
    model = dist.wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = TrainStep(
        model,
        opt,
        loss_fn=lambda m, x, y: nn.functional.cross_entropy(m(x), y),
        precision=Precision("fp32", device=where.device),
        accumulate=2,
        clip_grad_norm=1.0,
    )
    g = torch.Generator().manual_seed(0)
    data = list(
        zip(torch.randn(32, 8, generator=g), torch.randint(0, 3, (32,), generator=g), strict=True)
    )
    loader = dist.loader(data, batch_size=4)  # type: ignore[arg-type]
    if fast:
        warmup_memory(step, (torch.randn(16, 8), torch.randint(0, 3, (16,))))
    meter = Throughput(dtype=step.precision, device="cpu")
    for _ in range(2):
        for x, y in progress(meter.track(loader), meter=meter, stream=io.StringIO()):
            if step(x, y).stepped:
                meter.step(samples=x.shape[0] * step.accumulate)
    assert meter.stats() is not None
    flops = count_flops(lambda: model(torch.randn(4, 8)))
    assert flops > 0
    dist.shutdown()
    if applied is not None:
        applied.undo()
    return [p.detach().clone() for p in model.parameters()]


def test_the_guide_loop_trains_the_same_with_every_fix(monkeypatch):
    plain = _train(fast=False, monkeypatch=monkeypatch)
    fast = _train(fast=True, monkeypatch=monkeypatch)
    for a, b in zip(plain, fast, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
