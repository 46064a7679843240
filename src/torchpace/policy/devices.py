"""Which device a run trains on, and what that kind is: one vocabulary for the rules, the fix
code and the runner's sensors."""

from __future__ import annotations

from typing import Literal, cast

Device = Literal["cpu", "cuda", "rocm", "mps", "unknown"]
_KNOWN = ("cpu", "cuda", "rocm", "mps")


def device(kind: str | None) -> Device:
    """`kind` (a trace header's or a live record's string) as a Device; "unknown" otherwise."""
    return cast(Device, kind) if kind in _KNOWN else "unknown"


def is_accelerator(kind: str | None) -> bool:
    """Whether the model runs on a device other than the host CPU that torchpace knows."""
    return kind in ("cuda", "rocm", "mps")


def is_cuda(kind: str | None) -> bool:
    """Whether torch drives the device through torch.cuda (ROCm is "cuda" to torch): the kinds
    with cuDNN, pinned-memory copies, GradScaler("cuda") and autocast("cuda")."""
    return kind in ("cuda", "rocm")
