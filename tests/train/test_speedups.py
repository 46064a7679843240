"""apply_speedups: records every change with its old value, undoes it, and keeps the math."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from train_helpers import TinyNet

from torchpace.train import apply_speedups


def _conv_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 4, 3), nn.Flatten())


@pytest.fixture(autouse=True)
def restore_globals():
    """Fail-safe: put the process-wide flags back even if a test fails before undo()."""
    precision = torch.get_float32_matmul_precision()
    matmul = torch.backends.cuda.matmul.fp32_precision
    conv = torch.backends.cudnn.conv.fp32_precision
    rnn = torch.backends.cudnn.rnn.fp32_precision
    bench = torch.backends.cudnn.benchmark
    yield
    torch.set_float32_matmul_precision(precision)
    torch.backends.cuda.matmul.fp32_precision = matmul
    torch.backends.cudnn.conv.fp32_precision = conv
    torch.backends.cudnn.rnn.fp32_precision = rnn
    torch.backends.cudnn.benchmark = bench


def test_globals_are_recorded_and_undone():
    torch.backends.cudnn.benchmark = False
    torch.set_float32_matmul_precision("highest")
    applied = apply_speedups(TinyNet())
    assert torch.backends.cudnn.benchmark is True
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    # Both APIs read it (Lightning reads the legacy one: set through the new one alone, it raises).
    assert torch.get_float32_matmul_precision() == "high"
    settings = {c.setting: (c.before, c.after) for c in applied.changes}
    assert settings["cudnn.benchmark"] == (False, True)
    assert settings["float32_matmul_precision"] == ("highest", "high")
    assert "cudnn.benchmark: False -> True" in str(applied)
    applied.undo()
    assert torch.backends.cudnn.benchmark is False
    assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert torch.get_float32_matmul_precision() == "highest"
    assert applied.changes == []


def test_settings_already_on_are_not_reported():
    torch.backends.cudnn.benchmark = True
    applied = apply_speedups(TinyNet(), tf32=False)
    assert applied.changes == []
    assert str(applied) == "apply_speedups: nothing changed"


def test_channels_last_only_for_conv_models_by_default():
    linear = apply_speedups(TinyNet(), cudnn_benchmark=False, tf32=False)
    assert linear.changes == []
    model = _conv_net()
    weight = model[0].weight
    conv = apply_speedups(model, cudnn_benchmark=False, tf32=False)
    assert [c.setting for c in conv.changes] == ["model.memory_format"]
    assert model[0].weight is weight  # same Parameter: an existing optimizer stays valid
    assert weight.is_contiguous(memory_format=torch.channels_last)
    conv.undo()
    assert weight.is_contiguous()


def test_channels_last_keeps_outputs():
    model = _conv_net()
    x = torch.randn(2, 3, 10, 10)
    expected = model(x)
    apply_speedups(model, cudnn_benchmark=False, tf32=False, channels_last=True)
    torch.testing.assert_close(model(x), expected, rtol=1e-5, atol=1e-6)


def test_compile_passes_options_and_undo_restores_eager():
    model = TinyNet().eval()
    x = torch.randn(4, 8)
    expected = model(x)
    applied = apply_speedups(model, compile={"backend": "eager"}, cudnn_benchmark=False, tf32=False)
    assert model._compiled_call_impl is not None
    assert applied.changes[0].after == {"backend": "eager"}
    torch.testing.assert_close(model(x), expected)
    assert "fc1.weight" in model.state_dict()  # compiled in place: no "_orig_mod." prefix
    applied.undo()
    assert model._compiled_call_impl is None


def test_rejects_non_modules():
    with pytest.raises(TypeError, match=r"apply_speedups needs an nn.Module; got function"):
        apply_speedups(lambda x: x)  # type: ignore[arg-type]
