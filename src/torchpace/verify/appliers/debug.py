"""Debugging switches off: anomaly detection, CUDA_LAUNCH_BLOCKING and friends, forced determinism."""

from __future__ import annotations

import os

from torchpace.doctor.finding import Finding
from torchpace.verify.appliers._calls import keep
from torchpace.verify.appliers.base import Applier, Context, Fix, Params

_ENV = ("CUDA_LAUNCH_BLOCKING", "PYTORCH_NO_CUDA_MEMORY_CACHING", "TORCH_SHOW_CPP_STACKTRACES")


def _plan_debug(finding: Finding, context: Context) -> list[Fix] | None:
    apis = finding.evidence.get("debug_apis")
    if finding.rule != "debug-api-enabled" or not isinstance(apis, list):
        return None
    text = " ".join(str(a) for a in apis)
    env = [name for name in _ENV if f"{name}=" in text]
    anomaly = "anomaly" in text
    sync = "sync_debug_mode" in text
    words = [*(["anomaly detection off"] if anomaly else []), *(f"{n} unset" for n in env)]
    words += ["sync debug mode off"] if sync else []
    params = {"anomaly": anomaly, "env": env, "sync_debug": sync}
    return [Fix("debug-off", ", ".join(words) or "debugging switches off", params)]


def _apply_debug(params: Params) -> None:
    import torch

    for name in params.get("env", ()):
        os.environ.pop(str(name), None)
    if params.get("anomaly"):
        # set_detect_anomaly(True) and detect_anomaly() both go through torch.set_anomaly_enabled
        keep(torch, "set_anomaly_enabled", False)
    if params.get("sync_debug") and hasattr(torch.cuda, "set_sync_debug_mode"):
        keep(torch.cuda, "set_sync_debug_mode", 0)


def _plan_deterministic(finding: Finding, context: Context) -> list[Fix] | None:
    if finding.rule != "debug-api-enabled" or "flags" not in finding.evidence:
        return None
    return [
        Fix(
            "deterministic-off",
            "deterministic algorithms off",
            {},
            numerics="results are no longer bitwise reproducible from run to run",
        )
    ]


def _apply_deterministic(params: Params) -> None:
    import torch

    keep(torch, "use_deterministic_algorithms", False)
    torch.backends.cudnn.deterministic = False


ANOMALY = Applier("debug-off", _plan_debug, _apply_debug)
DETERMINISTIC = Applier("deterministic-off", _plan_deterministic, _apply_deterministic)
