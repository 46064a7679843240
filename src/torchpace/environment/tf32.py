"""TF32 for fp32 matmuls, read and set so that both of torch's APIs keep answering.

torch >= 2.9 has per-backend switches (`torch.backends.cuda.matmul.fp32_precision = "tf32"`)
beside the legacy global one (`torch.set_float32_matmul_precision("high")`). Set through the new
API alone, TF32 makes the legacy getters raise ("mix of the legacy and new APIs"): Lightning reads
`torch.get_float32_matmul_precision()` on every fit (the bench's Lightning peer failed so on an
H200), and so did the doctor's flag sensor (a script using the new API crashed the doctor). The
legacy setter also sets the per-backend values (CUDA and oneDNN matmuls), so both APIs agree:
torchpace sets matmul precision through it and reads through the new API where it exists.
"""

from __future__ import annotations

from typing import Any

import torch


def matmul_tf32() -> bool:
    """Whether fp32 CUDA matmuls may run in TF32 (however the script set it)."""
    matmul = torch.backends.cuda.matmul
    value = getattr(matmul, "fp32_precision", None)
    if value is None:  # torch < 2.9
        return bool(matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"
    if value == "none":  # inherits the global switch
        value = getattr(torch.backends, "fp32_precision", "none")
    return value == "tf32"


def conv_tf32() -> bool:
    """Whether fp32 cuDNN convolutions may run in TF32 (cuDNN's default: on)."""
    conv = getattr(torch.backends.cudnn, "conv", None)
    value = getattr(conv, "fp32_precision", None)
    if value is None:  # torch < 2.9
        return bool(torch.backends.cudnn.allow_tf32)
    if value == "none":  # inherits cuDNN's, then the global switch
        value = getattr(torch.backends.cudnn, "fp32_precision", "none")
    if value == "none":
        value = getattr(torch.backends, "fp32_precision", "none")
    return value == "tf32"


def matmul_precision() -> str:
    """The legacy name of the fp32 matmul precision ("highest", "high", "medium"); where the
    legacy getter refuses a state set through the new API, the name that state stands for."""
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return "high" if matmul_tf32() else "highest"


def set_matmul_precision(name: str) -> None:
    """Set the fp32 matmul precision in both APIs (the legacy setter writes the new switches)."""
    torch.set_float32_matmul_precision(name)


def conv_switches(tf32: bool) -> list[tuple[str, Any, str, Any]]:
    """cuDNN's TF32 switches for convolutions and RNNs, as (name, object, attribute, value) for
    TF32 on or off: torch >= 2.9 has per-backend `fp32_precision`, and the legacy getter raises
    when conv and RNN differ, so both are set; older torch has one `allow_tf32`."""
    cudnn = torch.backends.cudnn
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        value = "tf32" if tf32 else "ieee"
        return [
            (f"cudnn.{op}.fp32_precision", getattr(cudnn, op), "fp32_precision", value)
            for op in ("conv", "rnn")
        ]
    return [("cudnn.allow_tf32", cudnn, "allow_tf32", tf32)]  # pragma: no cover - older torch
