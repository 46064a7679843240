"""TrainStep: accumulation equals one big batch, clipping after unscale, scheduler rules."""

from __future__ import annotations

import re

import pytest
import torch
from train_helpers import TinyNet, cross_entropy

from torchpace.train import Precision, TrainStep


def _after_one_step(data, *, micro: int, accumulate: int, precision: str = "fp32"):
    torch.manual_seed(0)
    model = TinyNet()
    model.norm = torch.nn.Identity()  # BatchNorm statistics depend on the micro-batch size
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    step = TrainStep(model, opt, loss_fn=cross_entropy, accumulate=accumulate, precision=precision)
    x, y = data
    outs = [step(x[i : i + micro], y[i : i + micro]) for i in range(0, len(x), micro)]
    return model, outs


@pytest.mark.parametrize("accumulate", [2, 4, 8])
def test_batch_8_equals_micro_batches_times_accumulate(data, accumulate):
    big, big_outs = _after_one_step(data, micro=8, accumulate=1)
    small, small_outs = _after_one_step(data, micro=8 // accumulate, accumulate=accumulate)
    assert [o.stepped for o in big_outs] == [True]
    assert [o.stepped for o in small_outs] == [False] * (accumulate - 1) + [True]
    for a, b in zip(big.parameters(), small.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_accumulation_would_differ_without_dividing_the_loss(data):
    # Guards the equivalence test: with accumulate=1 on micro-batches it must NOT match.
    big, _ = _after_one_step(data, micro=8, accumulate=1)
    summed, _ = _after_one_step(data, micro=2, accumulate=1)
    assert not all(
        torch.allclose(a, b) for a, b in zip(big.parameters(), summed.parameters(), strict=True)
    )


def test_returned_loss_is_the_undivided_detached_micro_batch_loss(tiny, data):
    step = TrainStep(
        tiny, torch.optim.SGD(tiny.parameters(), lr=0.0), loss_fn=cross_entropy, accumulate=2
    )
    out = step(*data)
    assert not out.loss.requires_grad
    with torch.no_grad():
        torch.testing.assert_close(out.loss, cross_entropy(tiny, *data))


def test_zero_grad_sets_none_after_the_step(tiny, data):
    step = TrainStep(tiny, torch.optim.SGD(tiny.parameters(), lr=0.1), loss_fn=cross_entropy)
    step(*data)
    assert all(p.grad is None for p in tiny.parameters())


def test_clipping_sees_unscaled_gradients(data):
    torch.manual_seed(0)
    model = TinyNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = TrainStep(
        model,
        opt,
        loss_fn=cross_entropy,
        precision=Precision("fp16", device="cpu"),
        clip_grad_norm=1e9,
    )
    norm = step(*data).grad_norm
    torch.manual_seed(0)
    reference = TinyNet()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = cross_entropy(reference, *data)
    loss.backward()
    expected = torch.nn.utils.get_total_norm([p.grad for p in reference.parameters()])
    # Without unscale_ first the norm would be 65536x (the initial loss scale) too large.
    torch.testing.assert_close(norm, expected, rtol=1e-3, atol=1e-5)


def test_clipping_bounds_the_update(data):
    torch.manual_seed(0)
    model = TinyNet()
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    step = TrainStep(
        model,
        torch.optim.SGD(model.parameters(), lr=1.0),
        loss_fn=cross_entropy,
        clip_grad_norm=1e-3,
    )
    step(*data)
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert (after - before).norm() <= 1e-3 * 1.0001


def test_scheduler_steps_once_per_optimizer_step(tiny, data):
    opt = torch.optim.SGD(tiny.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda n: 1.0 / (n + 1))
    step = TrainStep(tiny, opt, loss_fn=cross_entropy, accumulate=2, scheduler=sched)
    for _ in range(4):
        step(*data)
    assert sched.last_epoch == 2


def test_default_loss_fn_uses_model_output_loss(data):
    class WithLoss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 1)

        def forward(self, x):
            return type("Out", (), {"loss": self.fc(x).pow(2).mean()})()

    model = WithLoss()
    assert TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1))(data[0]).stepped


def test_default_loss_fn_rejects_non_loss_outputs(tiny, data):
    step = TrainStep(tiny, torch.optim.SGD(tiny.parameters(), lr=0.1))
    tiny.forward = lambda x: [x]  # type: ignore[method-assign]
    with pytest.raises(
        TypeError, match="the model returned list, not a loss tensor; pass loss_fn="
    ):
        step(data[0])


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_accumulate(tiny, bad):
    with pytest.raises(
        ValueError, match=re.escape(f"accumulate must be a whole number >= 1; got {bad!r}")
    ):
        TrainStep(tiny, torch.optim.SGD(tiny.parameters(), lr=0.1), accumulate=bad)


def test_bad_clip(tiny):
    with pytest.raises(ValueError, match=r"clip_grad_norm must be > 0 or None; got -1\.0"):
        TrainStep(tiny, torch.optim.SGD(tiny.parameters(), lr=0.1), clip_grad_norm=-1.0)


def test_reset_drops_a_partial_accumulation(tiny, data):
    step = TrainStep(
        tiny, torch.optim.SGD(tiny.parameters(), lr=0.1), loss_fn=cross_entropy, accumulate=4
    )
    step(*data)
    assert step.pending == 1 and tiny.fc1.weight.grad is not None
    step.reset()
    assert step.pending == 0 and tiny.fc1.weight.grad is None
