"""Debugging switches left on (anomaly detection, CUDA_LAUNCH_BLOCKING, ...) slow every step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection


def _switches_off(apis: tuple[str, ...]) -> str:
    """One line per switch that was seen on: only those (a CPU run gets no CUDA variables)."""
    lines = []
    for api in apis:
        switch = api.split(": ", 1)[0]
        if "set_detect_anomaly" in switch or "detect_anomaly" in switch:
            lines.append("torch.autograd.set_detect_anomaly(False)  # or drop detect_anomaly()")
        elif "=" in switch and "(" not in switch:  # an environment variable: NAME=value
            lines.append(f"unset {switch.split('=', 1)[0]}  # in the shell that starts training")
        else:
            lines.append(f"# remove: {switch}")
    return "\n".join(lines) + "\n# keep them for a debugging run only"


@rule("debug-api-enabled", input="live")
def debug_api_enabled(live: Inspection) -> list[Finding]:
    """Flag debugging APIs left on while training, and (softly) deterministic algorithms."""
    found: list[Finding] = []
    if live.flags.debug_apis:
        found.append(
            Finding(
                rule="debug-api-enabled",
                severity=Severity.HIGH,
                summary=f"{len(live.flags.debug_apis)} debugging switch(es) left on while training: "
                + "; ".join(live.flags.debug_apis),
                evidence={"debug_apis": list(live.flags.debug_apis)},
                fix=_switches_off(live.flags.debug_apis),
            )
        )
    if live.flags.deterministic_algorithms or (
        live.flags.cudnn_deterministic and live.device.kind != "cpu"
    ):
        flags = []
        if live.flags.deterministic_algorithms:
            flags.append("torch.use_deterministic_algorithms(True)")
        cudnn = bool(live.flags.cudnn_deterministic) and live.device.kind != "cpu"
        if cudnn:
            flags.append("torch.backends.cudnn.deterministic = True")
        found.append(
            Finding(
                rule="debug-api-enabled",
                severity=Severity.LOW,
                summary="deterministic algorithms are forced (" + ", ".join(flags) + "): "
                "slower kernels are chosen for bitwise reproducibility",
                evidence={"flags": list[EvidenceValue](flags)},
                fix="torch.use_deterministic_algorithms(False)"
                + ("\ntorch.backends.cudnn.deterministic = False" if cudnn else ""),
                caveat="Keep them if you need bitwise-reproducible runs; the cost depends on the "
                "ops used (scatter/index_add and cuDNN convolutions pay most).",
            )
        )
    return found
