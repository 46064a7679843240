"""Which device a run trains on, and what that kind is: one vocabulary for the rules, the fix
code and the runner's sensors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

if TYPE_CHECKING:
    import torch

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


def default_device() -> torch.device:
    """The device a new model trains on here: torch's current accelerator (CUDA with its index,
    MPS, XPU...), else the CPU; what DevicePrefetcher, Precision, Throughput and fast_loader use."""
    import torch  # only here: the rest of policy/ is the standard library

    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    found = None
    if accelerator is not None and accelerator.is_available():
        found = accelerator.current_accelerator()
    elif accelerator is None and torch.cuda.is_available():
        found = torch.device("cuda")
    if found is None:
        return torch.device("cpu")
    if found.type == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(found)


def has_accelerator() -> bool:
    """Whether a new model here would train on something other than the host CPU."""
    return default_device().type != "cpu"
