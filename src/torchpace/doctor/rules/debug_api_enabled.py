"""Debugging switches left on (anomaly detection, CUDA_LAUNCH_BLOCKING, ...) slow every step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import rule

if TYPE_CHECKING:
    from torchpace.doctor.live import Inspection


@rule("debug-api-enabled", input="live")
def debug_api_enabled(live: Inspection) -> list[Finding]:
    """Flag debugging APIs left on while training, and (softly) deterministic algorithms."""
    found: list[Finding] = []
    if live.debug_apis:
        found.append(
            Finding(
                rule="debug-api-enabled",
                severity=Severity.HIGH,
                summary=f"{len(live.debug_apis)} debugging switch(es) left on while training: "
                + "; ".join(live.debug_apis),
                evidence={"debug_apis": list(live.debug_apis)},
                fix="remove torch.autograd.set_detect_anomaly(True) / detect_anomaly() and unset "
                "CUDA_LAUNCH_BLOCKING (keep them for a debugging run only)",
            )
        )
    if live.deterministic_algorithms or (live.cudnn_deterministic and live.device_kind != "cpu"):
        flags = []
        if live.deterministic_algorithms:
            flags.append("torch.use_deterministic_algorithms(True)")
        if live.cudnn_deterministic:
            flags.append("torch.backends.cudnn.deterministic = True")
        found.append(
            Finding(
                rule="debug-api-enabled",
                severity=Severity.LOW,
                summary="deterministic algorithms are forced (" + ", ".join(flags) + "): "
                "slower kernels are chosen for bitwise reproducibility",
                evidence={"flags": list[EvidenceValue](flags)},
                fix="torch.use_deterministic_algorithms(False); "
                "torch.backends.cudnn.deterministic = False",
                caveat="Keep them if you need bitwise-reproducible runs; the cost depends on the "
                "ops used (scatter/index_add and cuDNN convolutions pay most).",
            )
        )
    return found
