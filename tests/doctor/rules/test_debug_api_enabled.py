"""debug-api-enabled: debugging switches high, determinism low with a caveat."""

from __future__ import annotations

from torchpace.doctor.finding import Severity
from torchpace.doctor.live import Inspection
from torchpace.doctor.rules.debug_api_enabled import debug_api_enabled


def test_debug_switches_and_determinism() -> None:
    live = Inspection(debug_apis=("CUDA_LAUNCH_BLOCKING=1: x",), deterministic_algorithms=True)
    high, low = debug_api_enabled(live)
    assert high.severity is Severity.HIGH and "CUDA_LAUNCH_BLOCKING" in high.summary
    assert low.severity is Severity.LOW and "reproducible" in low.caveat
    assert debug_api_enabled(Inspection(deterministic_algorithms=False)) == []
