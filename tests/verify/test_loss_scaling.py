"""The fp16 arm's GradScaler, driven by patches, on CPU (torch.autocast("cpu", dtype=float16) and
torch.amp.GradScaler("cpu") have the semantics of the CUDA ones): the script's own backward,
optimizer steps and clipping give the math of the hand-written AMP loop the finding prints."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from torch import nn

from torchpace.verify.appliers import apply
from torchpace.verify.appliers._loss_scaling import LossScaling
from torchpace.verify.appliers.base import NotApplicable, forget_refusals, refusal
from torchpace.verify.appliers.precision import fp16_with_scaler

INIT_SCALE = 2.0**16  # torch.amp.GradScaler's default


@pytest.fixture
def patches_undone() -> Iterator[list[LossScaling]]:
    """Whatever the test switches on is undone after it (the child never undoes: one run)."""
    torch.optim.SGD([nn.Parameter(torch.zeros(1))])  # torch's own step hook, once per process
    call, backward, sgd_step = nn.Module.__call__, torch.autograd.backward, torch.optim.SGD.step
    installed: list[LossScaling] = []
    yield installed
    for scaling in installed:
        scaling.undo()
    nn.Module.__call__ = call  # type: ignore[method-assign]
    forget_refusals()
    assert torch.autograd.backward is backward and torch.optim.SGD.step is sgd_step


@pytest.fixture
def arm(patches_undone: list[LossScaling]) -> LossScaling:
    """The fp16 arm switched on with device "cpu", as the child switches it on with "cuda"."""
    scaling = fp16_with_scaler("cpu")
    patches_undone.append(scaling)
    return scaling


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _batches(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g)) for _ in range(n)]


def _train(model: nn.Module, *, steps: int = 5, clip: bool = False) -> list[float]:
    """The script's plain fp32 loop (SGD); the clip norms it saw."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    norms = []
    for x, y in _batches(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        if clip:
            norms.append(float(nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)))
        opt.step()
    return norms


def _close(a: nn.Module, b: nn.Module, atol: float) -> bool:
    return all(
        torch.allclose(p, q, atol=atol) for p, q in zip(a.parameters(), b.parameters(), strict=True)
    )


def test_backward_sees_scaled_gradients_and_the_step_unscaled_ones(
    patches_undone: list[LossScaling],
) -> None:
    ref, model = _model(), _model()
    (x, y), *_ = _batches(1)
    nn.functional.mse_loss(ref(x), y).backward()
    arm = fp16_with_scaler("cpu")
    patches_undone.append(arm)
    seen: list[torch.Tensor] = []
    model[0].weight.register_hook(lambda g: seen.append(g.clone()))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    nn.functional.mse_loss(model(x), y).backward()
    (inside,) = seen
    assert torch.allclose(inside / INIT_SCALE, ref[0].weight.grad, rtol=0.05, atol=1e-4)
    opt.step()  # scaler.step: unscaled in place, then SGD
    assert torch.allclose(model[0].weight.grad, ref[0].weight.grad, rtol=0.05, atol=1e-4)
    assert arm.stage == {id(opt): "stepped"}


def test_parameters_after_training_stay_close_to_the_fp32_run(
    patches_undone: list[LossScaling],
) -> None:
    ref = _model()
    _train(ref)
    arm = fp16_with_scaler("cpu")
    patches_undone.append(arm)
    model = _model()
    _train(model)
    assert _close(model, ref, atol=1e-2) and not _close(model, _model(), atol=1e-3)
    assert arm.scaler.get_scale() == INIT_SCALE  # no overflow, no growth in 5 steps


class _Checkpointed(nn.Module):
    """`inner` under reentrant activation checkpointing: its backward calls
    torch.autograd.backward again, from inside the outer backward."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        out: torch.Tensor = checkpoint(self.inner, x, use_reentrant=True)
        return out


def test_reentrant_checkpointing_is_scaled_once(patches_undone: list[LossScaling]) -> None:
    ref = _model()
    _train(ref)
    arm = fp16_with_scaler("cpu")
    patches_undone.append(arm)
    plain = _model()
    model = nn.Sequential(plain[0], _Checkpointed(nn.Sequential(plain[1], plain[2])))
    _train(model)
    assert _close(model, ref, atol=1e-2) and arm.scaler.get_scale() == INIT_SCALE


def test_clipping_sees_unscaled_gradients(patches_undone: list[LossScaling]) -> None:
    ref = _model()
    plain = _train(ref, clip=True)
    patches_undone.append(fp16_with_scaler("cpu"))
    model = _model()
    scaled = _train(model, clip=True)
    # Clipping scaled gradients would see norms INIT_SCALE times larger and clip every step.
    assert scaled == pytest.approx(plain, rel=0.02)
    assert _close(model, ref, atol=1e-2)


def _inf_at(step: int, counter: list[int]) -> Callable[[torch.Tensor], torch.Tensor]:
    def hook(grad: torch.Tensor) -> torch.Tensor:
        return grad * float("inf") if counter[0] == step else grad

    return hook


def test_an_inf_gradient_skips_the_step_and_backs_the_scale_off(arm: LossScaling) -> None:
    model = _model()
    counter = [0]
    model[2].bias.register_hook(_inf_at(1, counter))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = None
    for counter[0], (x, y) in enumerate(_batches(3)):
        if counter[0] == 1:
            before = [p.detach().clone() for p in model.parameters()]
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        if counter[0] == 2:  # the deferred update ran at this backward
            assert arm.scaler.get_scale() == INIT_SCALE / 2
        opt.step()
        if counter[0] == 1:
            assert before is not None
            assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))


def _two_optimizers(model: nn.Sequential, device: str, by_hand: bool) -> None:
    """Two optimizers, one per layer, an inf in the first one's gradients at step 1. By hand:
    the AMP loop the finding prints, one scaler.update() after both steps."""
    counter = [0]
    model[0].weight.register_hook(_inf_at(1, counter))
    first = torch.optim.SGD(model[0].parameters(), lr=0.1)
    second = torch.optim.SGD(model[2].parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler(device)
    for counter[0], (x, y) in enumerate(_batches(4)):
        x, y = x.to(device), y.to(device)
        first.zero_grad()
        second.zero_grad()
        if by_hand:
            with torch.amp.autocast(device, dtype=torch.float16):
                out = model(x)
            scaler.scale(nn.functional.mse_loss(out.float(), y)).backward()
            scaler.step(first)
            scaler.step(second)
            scaler.update()
        else:
            nn.functional.mse_loss(model(x), y).backward()
            first.step()
            second.step()


@pytest.mark.parametrize(
    "device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda(reason="GradScaler on fp16"))]
)
def test_two_optimizers_match_the_hand_written_amp_loop(
    patches_undone: list[LossScaling], device: str
) -> None:
    """An update after the first optimizer's (skipped) step would unscale the second one's
    gradients by the halved scale: twice too large."""
    by_hand = _model().to(device)
    _two_optimizers(by_hand, device, by_hand=True)
    arm = fp16_with_scaler(device)
    patches_undone.append(arm)
    model = _model().to(device)
    _two_optimizers(model, device, by_hand=False)
    assert _close(model, by_hand, atol=1e-6)
    assert arm.scaler.get_scale() == INIT_SCALE / 2  # the skipped step backed the scale off


def test_a_closure_step_is_not_applicable_and_leaves_the_parameters(arm: LossScaling) -> None:
    model = _model()
    opt = torch.optim.LBFGS(model.parameters(), max_iter=2)
    (x, y), *_ = _batches(1)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(NotApplicable, match="not applicable here"):
        opt.step(closure)
    with pytest.raises(NotApplicable):
        opt.step(closure=closure)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    assert "LBFGS.step(closure)" in (refusal() or "")


def test_a_backward_without_an_optimizer_is_not_applicable(arm: LossScaling) -> None:
    model = _model()
    (x, y), *_ = _batches(1)
    with pytest.raises(NotApplicable):
        nn.functional.mse_loss(model(x), y).backward()
    assert "before it builds any torch.optim optimizer" in (refusal() or "")


def test_patches_take_keyword_arguments_and_leave_other_calls_alone(arm: LossScaling) -> None:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    (x, _), *_ = _batches(1)
    out = model(x)
    # A backward with explicit gradients and inputs, all by keyword (seeds of 1 would overflow
    # fp16 once scaled: 65536 > 65504, as they would in the hand-written loop).
    seed = torch.full_like(out, 1 / 128)
    torch.autograd.backward(tensors=out, grad_tensors=seed, inputs=[model[2].bias])
    assert model[2].bias.grad is not None and model[0].weight.grad is None
    norm = nn.utils.clip_grad_norm_(
        parameters=model.parameters(), max_norm=1e9, norm_type=2.0, error_if_nonfinite=True
    )
    assert float(norm) == pytest.approx(0.5, rel=0.01)  # 32/128 per bias element, unscaled
    nn.utils.clip_grad_value_(parameters=[model[2].bias], clip_value=1e9, foreach=None)
    opt.step(closure=None)  # a None closure is a plain step
    assert arm.stage == {id(opt): "stepped"}
    # autograd.grad is not patched: gradients for the script's own use stay unscaled.
    (g,) = torch.autograd.grad(model(x).sum(), [model[2].bias])
    assert torch.allclose(g, torch.full((4,), 32.0))


def test_the_planned_spec_switches_on_fp16_with_a_scaler(
    patches_undone: list[LossScaling], monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchpace.verify.appliers import precision

    devices: list[str] = []
    monkeypatch.setattr(precision, "fp16_with_scaler", devices.append)
    apply([{"applier": "autocast", "device": "cuda", "dtype": "float16"}])
    assert devices == ["cuda"]
