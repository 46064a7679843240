"""The few stream operations the prefetcher needs, for any torch device module that has streams.

CUDA and ROCm (torch.cuda) and XPU (torch.xpu) expose the same Stream API. Tests substitute a
recording implementation to check the ordering on machines without an accelerator.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch


class StreamOps(Protocol):
    """Create, select and order streams on one device."""

    def current_stream(self) -> Any:
        """The stream the consumer is enqueuing work on now."""

    def new_stream(self) -> Any:
        """A new side stream on the device."""

    def use(self, stream: Any) -> AbstractContextManager[Any]:
        """Make `stream` current inside the `with` block."""

    def wait_stream(self, waiter: Any, waited: Any) -> None:
        """Later work on `waiter` starts after the work enqueued on `waited` so far."""

    def record_stream(self, tensor: torch.Tensor, stream: Any) -> None:
        """Tell the caching allocator that `tensor` is used on `stream`."""


class DeviceStreamOps:
    """StreamOps over a torch device module (torch.cuda, torch.xpu)."""

    def __init__(self, device: torch.device, module: Any) -> None:
        self.device = device
        self._module = module

    def current_stream(self) -> Any:
        """The device's current stream."""
        return self._module.current_stream(self.device)

    def new_stream(self) -> Any:
        """A new stream on the device."""
        return self._module.Stream(device=self.device)

    def use(self, stream: Any) -> AbstractContextManager[Any]:
        """Context manager selecting `stream`."""
        return self._module.stream(stream)  # type: ignore[no-any-return]

    def wait_stream(self, waiter: Any, waited: Any) -> None:
        """Make `waiter` wait for `waited`."""
        waiter.wait_stream(waited)

    def record_stream(self, tensor: torch.Tensor, stream: Any) -> None:
        """Record `tensor`'s use on `stream`."""
        tensor.record_stream(stream)


def stream_ops_for(device: torch.device) -> StreamOps | None:
    """StreamOps for `device`, or None where the device has no streams (CPU, MPS, ...)."""
    if device.type == "cpu":
        return None
    module = getattr(torch, device.type, None)
    needed = ("Stream", "current_stream", "stream")
    if module is None or not all(hasattr(module, name) for name in needed):
        return None
    return DeviceStreamOps(device, module)
