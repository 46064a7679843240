"""debug-api-enabled: debugging switches high, determinism low with a caveat."""

from __future__ import annotations

from torchpace.doctor.finding import Severity
from torchpace.doctor.rules.debug_api_enabled import debug_api_enabled
from torchpace.runner.sensors.flags import FlagsRecord
from torchpace.runner.sensors.host import DeviceRecord
from torchpace.runner.sensors.inspection import Inspection


def test_debug_switches_and_determinism() -> None:
    live = Inspection(
        flags=FlagsRecord(debug_apis=("CUDA_LAUNCH_BLOCKING=1: x",), deterministic_algorithms=True)
    )
    high, low = debug_api_enabled(live)
    assert high.severity is Severity.HIGH and "CUDA_LAUNCH_BLOCKING" in high.summary
    assert low.severity is Severity.LOW and "reproducible" in low.caveat
    assert debug_api_enabled(Inspection(flags=FlagsRecord(deterministic_algorithms=False))) == []


def test_the_fix_names_only_the_switches_that_were_on() -> None:
    anomaly = "torch.autograd.set_detect_anomaly(True): every backward op is checked"
    (f,) = debug_api_enabled(
        Inspection(device=DeviceRecord(kind="cpu"), flags=FlagsRecord(debug_apis=(anomaly,)))
    )
    assert "set_detect_anomaly(False)" in f.fix and "CUDA" not in f.fix
    (g,) = debug_api_enabled(
        Inspection(flags=FlagsRecord(debug_apis=("CUDA_LAUNCH_BLOCKING=1: serialises",)))
    )
    assert "unset CUDA_LAUNCH_BLOCKING" in g.fix
    (h,) = debug_api_enabled(
        Inspection(
            device=DeviceRecord(kind="cpu"),
            flags=FlagsRecord(deterministic_algorithms=True, cudnn_deterministic=True),
        )
    )
    assert "cudnn" not in h.fix and "cudnn" not in h.summary
