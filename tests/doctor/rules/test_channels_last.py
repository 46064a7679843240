"""channels-last: GPU conv nets with NCHW input."""

from __future__ import annotations

import pytest

from torchpace.doctor.finding import Severity
from torchpace.doctor.live import Inspection
from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.channels_last import channels_last


def test_nchw_conv_net_with_autocast_is_medium() -> None:
    live = Inspection(device_kind="cuda", conv_layers=20, conv_input_channels_last=False,
                      autocast_in_forward=True)  # fmt: skip
    (f,) = channels_last(live)
    assert f.severity is Severity.MEDIUM and "channels_last" in f.fix and not f.caveat


def test_silent_when_already_nhwc_or_not_a_conv_net() -> None:
    assert channels_last(Inspection(device_kind="cuda", conv_layers=20,
                                    conv_input_channels_last=True)) == []  # fmt: skip
    assert channels_last(Inspection(device_kind="cuda", conv_layers=1,
                                    conv_input_channels_last=False)) == []  # fmt: skip


def test_cpu_runs_are_not_judged() -> None:
    with pytest.raises(NotApplicable, match="GPUs only"):
        channels_last(Inspection(device_kind="cpu", conv_layers=20, conv_input_channels_last=False))
