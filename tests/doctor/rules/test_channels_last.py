"""channels-last: GPU conv nets with NCHW input."""

from __future__ import annotations

import pytest

from torchpace.doctor.finding import Severity
from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.channels_last import channels_last
from torchpace.runner.sensors.host import DeviceRecord
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.model import ModelRecord


def test_nchw_conv_net_with_autocast_is_medium() -> None:
    live = Inspection(
        device=DeviceRecord(kind="cuda"),
        model=ModelRecord(conv_layers=20, conv_input_channels_last=False, autocast_in_forward=True),
    )
    (f,) = channels_last(live)
    assert f.severity is Severity.MEDIUM and "channels_last" in f.fix and not f.caveat
    assert 'x.to("cuda", memory_format=torch.channels_last, non_blocking=True)' in f.fix


def test_silent_when_already_nhwc_or_not_a_conv_net() -> None:
    assert channels_last(Inspection(device=DeviceRecord(kind='cuda'), model=ModelRecord(conv_layers=20, conv_input_channels_last=True))) == []  # fmt: skip
    assert channels_last(Inspection(device=DeviceRecord(kind='cuda'), model=ModelRecord(conv_layers=1, conv_input_channels_last=False))) == []  # fmt: skip


def test_cpu_conv_nets_get_cpu_code() -> None:
    (f,) = channels_last(
        Inspection(
            device=DeviceRecord(kind="cpu"),
            model=ModelRecord(conv_layers=20, conv_input_channels_last=False),
        )
    )
    assert "oneDNN" in f.summary and f.severity is Severity.LOW
    assert "x.contiguous(memory_format=torch.channels_last)" in f.fix
    assert "cuda" not in f.fix.lower() and "non_blocking" not in f.fix
    assert "--verify" in f.caveat


def test_other_devices_are_not_judged() -> None:
    with pytest.raises(NotApplicable, match="not mps"):
        channels_last(
            Inspection(
                device=DeviceRecord(kind="mps"),
                model=ModelRecord(conv_layers=20, conv_input_channels_last=False),
            )
        )
