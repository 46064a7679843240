"""Runtime calls in which a host thread blocked: waiting on the device, or on the driver starting up.

A *wait* is a call the host could not return from until the device caught up:
  - a synchronize: cuda/hip/cu Stream|Device|Event|Ctx Synchronize;
  - a synchronous copy: cudaMemcpy, cuMemcpyDtoH, hipMemcpy, hipMemcpyWithStream (no "Async"),
    which PyTorch uses for blocking copies on ROCm;
  - an asynchronous copy from the device into pageable host memory: CUDA stages it through a
    pinned buffer and returns only once it is done (cudaMemcpyAsync docs, "API synchronization").
An asynchronous copy *from* pageable memory to the device returns once the driver has staged the
buffer; that is copying, not waiting (pageable-copy reports it). `.item()` on a CPU tensor records
no runtime call at all, so only what the trace shows blocking on the device counts.

*Driver start-up* is a one-off call that takes milliseconds although its kind never waits on the
device: the lazy CUDA/HIP context creation, module loading or library handles that the first
launch, stream or event creation of a process pays for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchpace.trace.events import CopyDirection, GpuEvent, RuntimeCall

if TYPE_CHECKING:
    from torchpace.trace.model import Trace

# A launch, stream/event creation or attribute query returns in microseconds; one that takes this
# long is the driver creating the context or loading modules (seconds on a cold start).
DRIVER_INIT_MIN_US = 10_000.0
_NEVER_WAITS = frozenset({"launch", "event", "other", "memset"})
# Page-locking host memory (pin_memory) takes milliseconds on its own: an allocation, not start-up.
_HOST_ALLOC = re.compile(r"Host(Alloc|Malloc|Register|Free)|MallocHost|FreeHost")


@dataclass(frozen=True)
class HostWait:
    """One runtime call in which the host waited for the device."""

    call: RuntimeCall
    copy: GpuEvent | None  # the copy the call issued (a blocking memcpy); None for a synchronize

    @property
    def direction(self) -> CopyDirection | None:
        return self.copy.direction if self.copy is not None else None


def copies_by_correlation(trace: Trace) -> dict[int, GpuEvent]:
    """The trace's memcpys keyed by the correlation id of the runtime call that issued them."""
    cached = trace._cache.get("copies_by_correlation")
    if cached is None:
        cached = trace._cache["copies_by_correlation"] = {
            c.correlation: c for c in trace.copies if c.correlation is not None
        }
    return cached  # type: ignore[return-value]


def host_waits(trace: Trace) -> list[HostWait]:
    """Every wait of every host thread, by start (cached)."""
    cached = trace._cache.get("host_waits")
    if cached is not None:
        return cached  # type: ignore[return-value]
    copies = copies_by_correlation(trace)
    out = []
    for call in trace.runtime_of_kind("sync", "memcpy"):
        copy = copies.get(call.correlation) if call.correlation is not None else None
        if call.kind == "sync" or _blocking_copy(call, copy):
            out.append(HostWait(call, copy))
    trace._cache["host_waits"] = out
    return out


def _blocking_copy(call: RuntimeCall, copy: GpuEvent | None) -> bool:
    if "Async" not in call.name:
        return True
    return copy is not None and copy.direction == "DtoH" and copy.dst_kind == "Pageable"


def driver_init_calls(trace: Trace, min_us: float = DRIVER_INIT_MIN_US) -> list[RuntimeCall]:
    """Calls of kinds that never wait on the device but took `min_us` or more, by start."""
    long = [r for r in trace.runtime if r.dur_us >= min_us and r.kind in _NEVER_WAITS]
    return [r for r in long if not _HOST_ALLOC.search(r.name)]
