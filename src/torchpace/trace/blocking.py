"""Runtime calls in which a host thread blocked: waiting on the device, or on the driver starting up.

A *wait* is a call the host could not return from until the device caught up:
  - a synchronize: cuda/hip/cu Stream|Device|Event|Ctx Synchronize;
  - a synchronous download: cudaMemcpy, cuMemcpyDtoH, hipMemcpy, hipMemcpyWithStream (no
    "Async"; PyTorch issues hipMemcpyWithStream for blocking copies on ROCm);
  - an asynchronous copy from the device into pageable host memory: CUDA stages it through a
    pinned buffer and returns only once it is done (cudaMemcpyAsync docs, "API synchronization").
An upload that keeps the host until it runs (from pageable memory, or any synchronous
cudaMemcpy/hipMemcpy/hipMemcpyWithStream to the device) is copying, not waiting (pageable-copy
reports it). But before copying, the driver first synchronizes with the stream (same docs): an
upload issued while the GPU still runs earlier work starts copying only once that work is done.
That first part of the call, while the GPU was busy, is a wait on the device (the GPU's pace, not
the copy's); the rest is copying.

Host memory: CUDA names it (`Pageable`, `Pinned`); ROCm writes `Host` for both, so there the call
decides (`host_memory_blocks`): a synchronous call, or an asynchronous one that returned only once
its copy was mostly done (the runtime staged a pageable buffer), kept the host for the copy, which
pinned memory with non_blocking=True would not.
`.item()` on a CPU tensor records no runtime call at all, so only what the trace shows blocking on
the device counts.

*Driver start-up* is a one-off call that takes milliseconds although its kind never waits on the
device: the lazy CUDA/HIP context creation, module loading or library handles that the first
launch, stream or event creation of a process pays for.
"""

from __future__ import annotations

import re

import msgspec

from torchpace.trace.events import CopyDirection, GpuEvent, RuntimeCall
from torchpace.trace.gpu import gpu_columns  # the GPU's busy coverage (for queued uploads)
from torchpace.trace.recording import Recording, per_trace

# A launch, stream/event creation or attribute query returns in microseconds; one that takes this
# long is the driver creating the context or loading modules (seconds on a cold start).
DRIVER_INIT_MIN_US = 10_000.0
_NEVER_WAITS = frozenset({"launch", "event", "other", "memset"})
# Page-locking host memory (pin_memory) takes milliseconds on its own: an allocation, not start-up.
_HOST_ALLOC = re.compile(r"Host(Alloc|Malloc|Register|Free)|MallocHost|FreeHost")
# Staging a pageable buffer starts within tens to hundreds of microseconds of the call; a call
# whose copy starts after the GPU was busy this long in between waited for the queue ahead first.
UPLOAD_QUEUE_MIN_US = 50.0


class HostWait(msgspec.Struct, frozen=True):
    """One runtime call in which the host waited for the device."""

    call: RuntimeCall
    copy: GpuEvent | None  # the copy the call issued (a blocking memcpy); None for a synchronize
    # Where the wait ends when it is only the first part of the call: a pageable upload waits for
    # the queue ahead until its copy starts, then copies (None: the wait is the whole call).
    until_us: float | None = None

    @property
    def direction(self) -> CopyDirection | None:
        return self.copy.direction if self.copy is not None else None

    @property
    def end_us(self) -> float:
        return self.call.end_us if self.until_us is None else self.until_us

    @property
    def dur_us(self) -> float:
        return self.end_us - self.call.ts_us


@per_trace
def copies_by_correlation(trace: Recording) -> dict[int, GpuEvent]:
    """The trace's memcpys keyed by the correlation id of the runtime call that issued them."""
    return {c.correlation: c for c in trace.copies if c.correlation is not None}


@per_trace
def host_waits(trace: Recording) -> list[HostWait]:
    """Every wait of every host thread, by start."""
    copies = copies_by_correlation(trace)
    out = []
    for call in trace.runtime_of_kind("sync", "memcpy"):
        copy = copies.get(call.correlation) if call.correlation is not None else None
        if call.kind == "sync" or _blocking_copy(call, copy):
            out.append(HostWait(call, copy))
        elif copy is not None and _queued_upload(trace, call, copy):
            out.append(HostWait(call, copy, until_us=copy.ts_us))
    return out


@per_trace
def upload_queue_waits_us(trace: Recording) -> dict[int, float]:
    """How long each pageable upload call (by id) first waited for the queue ahead."""
    return {id(w.call): w.dur_us for w in host_waits(trace) if w.until_us is not None}


def host_memory_blocks(copy: GpuEvent, call: RuntimeCall | None) -> bool:
    """Whether a host<->device copy kept its host thread until it ran: its call was synchronous
    (cudaMemcpy, hipMemcpy, hipMemcpyWithStream: PyTorch's .to() without non_blocking=True on
    ROCm), its host memory is pageable, or (ROCm, which writes `Host` whether pinned or not) its
    asynchronous call returned only once the copy was mostly done (a staged pageable buffer)."""
    if copy.direction not in ("HtoD", "DtoH"):
        return False
    if call is not None and "Async" not in call.name:
        return True  # a synchronous copy returns once done, whatever the memory
    host = copy.src_kind if copy.direction == "HtoD" else copy.dst_kind
    if host == "Pageable":
        return True
    if host != "Host" or call is None:
        return False
    return call.end_us >= copy.ts_us + copy.dur_us / 2


def _blocking_copy(call: RuntimeCall, copy: GpuEvent | None) -> bool:
    if copy is not None and copy.direction == "HtoD":
        return False  # an upload waits only for the queue ahead (_queued_upload), then copies
    if "Async" not in call.name:
        return True
    return copy is not None and copy.direction == "DtoH" and host_memory_blocks(copy, call)


def _queued_upload(trace: Recording, call: RuntimeCall, copy: GpuEvent) -> bool:
    """A blocking upload whose copy started inside the call after the GPU ran earlier work."""
    if copy.direction != "HtoD" or not host_memory_blocks(copy, call):
        return False
    if not call.ts_us < copy.ts_us < call.end_us:
        return False
    return gpu_columns(trace).busy.covered(call.ts_us, copy.ts_us) >= UPLOAD_QUEUE_MIN_US


def driver_init_calls(trace: Recording, min_us: float = DRIVER_INIT_MIN_US) -> list[RuntimeCall]:
    """Calls of kinds that never wait on the device but took `min_us` or more, by start."""
    long = [r for r in trace.runtime if r.dur_us >= min_us and r.kind in _NEVER_WAITS]
    return [r for r in long if not _HOST_ALLOC.search(r.name)]
