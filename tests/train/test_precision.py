"""Precision: what "auto" picks per device, scaler rules, the two usage forms, skipped steps."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from train_helpers import TinyNet, cross_entropy

from torchpace.train import Precision, TrainStep
from torchpace.train import precision as precision_module


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch):
    """Pretend to be a CUDA GPU of a given capability (only the capability query is consulted)."""

    def set_capability(major: int, minor: int) -> None:
        monkeypatch.setattr(torch.version, "hip", None)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (major, minor))

    return set_capability


@pytest.mark.parametrize(
    ("capability", "mode", "why"),
    [
        ((9, 0), "bf16", "sm_90 >= 8.0"),
        ((8, 0), "bf16", "bf16 tensor cores"),
        ((7, 0), "fp16", "fp16 tensor cores but no bf16"),
        ((7, 5), "fp16", "GradScaler"),
        ((6, 1), "fp32", "no tensor cores"),
    ],
)
def test_auto_on_cuda_follows_capability(fake_cuda, capability, mode, why):
    fake_cuda(*capability)
    chosen, reason = precision_module._choose_auto(torch.device("cuda", 0))
    assert chosen == mode
    assert why in reason


@pytest.mark.parametrize(
    ("kind", "mode", "why"),
    [
        ("amx", "bf16", "AMX"),
        ("avx512_bf16", "fp32", "no matrix engine (AMX)"),  # often slower: measure it first
        ("none", "fp32", "lacks AVX512-BF16/AMX"),
    ],
)
def test_auto_on_cpu_needs_a_matrix_engine(monkeypatch, kind, mode, why):
    monkeypatch.setattr(precision_module, "_cpu_bf16", lambda: kind)
    p = Precision("auto", device="cpu")
    assert p.mode == mode and why in p.reason and mode in repr(p)
    assert p.scaler is None


def _doctor_prescribes(code: str | None) -> str:
    """What the doctor's no-mixed-precision fix prescribes: a dtype, or fp32 when it prints no
    autocast or only asks to measure one first."""
    if code is None or "measure it" in code:
        return "fp32"
    return "bf16" if "torch.bfloat16" in code else "fp16" if "torch.float16" in code else "fp32"


@pytest.mark.parametrize("kind", ["amx", "avx512_bf16", "none"])
def test_auto_on_cpu_is_what_the_doctor_prescribes(monkeypatch, kind):
    """One policy: Precision("auto") and the doctor's fix agree on every CPU (issue 22: auto
    picked bf16 on an AVX512-BF16 CPU where the doctor said bf16 is often slower)."""
    from torchpace.fixes.policy import autocast_code, target

    monkeypatch.setattr(precision_module, "_cpu_bf16", lambda: kind)
    assert Precision("auto", device="cpu").mode == _doctor_prescribes(
        autocast_code(target("cpu", kind))
    )


@pytest.mark.parametrize("capability", [(9, 0), (8, 6), (7, 5), (7, 0), (6, 1)])
def test_auto_on_cuda_is_what_the_doctor_prescribes(fake_cuda, capability):
    from torchpace.fixes.policy import autocast_code, target

    fake_cuda(*capability)
    chosen, _ = precision_module._choose_auto(torch.device("cuda", 0))
    assert chosen == _doctor_prescribes(autocast_code(target("cuda", None, capability)))


def test_auto_on_other_devices_is_fp32_and_says_why():
    mode, reason = precision_module._choose_auto(torch.device("meta"))
    assert mode == "fp32"
    assert "'meta'" in reason


def test_explicit_bf16_on_old_gpu_warns_in_reason(fake_cuda):
    fake_cuda(7, 0)
    reason = precision_module._explain_explicit("bf16", torch.device("cuda", 0))
    assert "emulates bf16" in reason


def test_bad_mode_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match=r"one of 'auto', 'bf16', 'fp16', 'fp32'; got 'fp8'"):
        Precision("fp8", device="cpu")  # type: ignore[arg-type]


def test_bf16_never_builds_a_scaler():
    p = Precision("bf16", device="cpu")
    assert p.scaler is None
    with pytest.raises(ValueError, match="only used with fp16, but this Precision is 'bf16'"):
        Precision("bf16", device="cpu", scaler=torch.amp.GradScaler("cpu"))


def test_fp16_builds_a_scaler_for_its_device():
    p = Precision("fp16", device="cpu")
    assert isinstance(p.scaler, torch.amp.GradScaler)
    assert p.dtype is torch.float16


def test_fp32_does_not_autocast(tiny, data):
    with Precision("fp32", device="cpu"):
        out = tiny(data[0])
    assert out.dtype is torch.float32


def test_decorator_and_context_forms_agree(data):
    p = Precision("bf16", device="cpu")
    torch.manual_seed(1)
    model = TinyNet()
    with p:
        with_context = model(data[0])
    assert with_context.dtype is torch.bfloat16
    model.forward = p(model.forward)  # type: ignore[method-assign]
    with_decorator = model(data[0])
    assert torch.equal(with_context, with_decorator)


def test_context_manager_nests():
    p = Precision("bf16", device="cpu")
    with p, p:
        assert torch.is_autocast_enabled("cpu")
    assert not torch.is_autocast_enabled("cpu")


def _sgd_step(precision: Precision, loss_scale: float):
    torch.manual_seed(0)
    model = TinyNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    step = TrainStep(
        model,
        opt,
        precision=precision,
        scheduler=sched,
        loss_fn=lambda m, x, y: cross_entropy(m, x, y) * loss_scale,
    )
    before = [p.detach().clone() for p in model.parameters()]
    return model, opt, step, before


def test_fp16_overflow_skips_the_step_and_the_scheduler(data):
    precision = Precision("fp16", device="cpu")
    model, opt, step, before = _sgd_step(precision, loss_scale=float("inf"))
    out = step(*data)
    assert (out.stepped, out.skipped) == (False, True)
    assert precision.skipped_steps == 1 and precision.optimizer_steps == 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert opt.param_groups[0]["lr"] == 0.1  # the scheduler did not advance
    assert precision.scaler is not None and precision.scaler.get_scale() < 65536.0


def test_fp16_finite_step_updates_and_schedules(data):
    precision = Precision("fp16", device="cpu")
    model, opt, step, before = _sgd_step(precision, loss_scale=1.0)
    out = step(*data)
    assert (out.stepped, out.skipped) == (True, False)
    assert precision.optimizer_steps == 1 and precision.skipped_steps == 0
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert opt.param_groups[0]["lr"] == 0.05


def test_state_dict_round_trip():
    p = Precision("fp16", device="cpu")
    p.skipped_steps = 3
    q = Precision("fp16", device="cpu")
    q.load_state_dict(p.state_dict())
    assert q.skipped_steps == 3


def test_precision_string_on_train_step_uses_the_model_device(tiny):
    step = TrainStep(tiny, torch.optim.SGD(tiny.parameters(), lr=0.1), precision="bf16")
    assert step.precision.device == torch.device("cpu")
    assert isinstance(tiny, nn.Module)


@pytest.mark.cuda
def test_fp16_overflow_on_a_real_gpu_skips_step_and_scheduler():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 3).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    precision = Precision("fp16", device="cuda")
    step = TrainStep(
        model, opt, precision=precision, scheduler=sched, loss_fn=lambda m, x: m(x).sum() * 1e30
    )
    before = [p.detach().clone() for p in model.parameters()]
    out = step(torch.randn(4, 8, device="cuda"))  # fp16 overflows: inf gradients
    assert out.skipped and precision.skipped_steps == 1
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert opt.param_groups[0]["lr"] == 0.1


@pytest.mark.parametrize(("native", "mode"), [(True, "bf16"), (False, "fp16")])
def test_auto_on_rocm_asks_for_native_bf16(monkeypatch, native, mode):
    monkeypatch.setattr(torch.version, "hip", "6.2")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: native)
    chosen, reason = precision_module._choose_auto(torch.device("cuda", 0))
    assert chosen == mode and "ROCm" in reason
