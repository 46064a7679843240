"""The profiler window gives freed memory the events pin back to the system at a step boundary,
checked in a fresh process: a pytest worker that ran other tests first holds freed memory and
allocated-but-untouched pages that hide how much new holes reuse (the check failed in make test
after test_memory_view and test_window_load). Prints one JSON line of what it saw."""

from __future__ import annotations

import ctypes
import json

from torchpace.runner import profiling
from torchpace.runner.load import heap_in_use_bytes, private_rss_bytes, release_freed_memory
from torchpace.runner.profiling import ProfileBounds, ProfilerWindow, Recording

MIB = 1 << 20
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]


def holes(mib: int) -> list[int]:
    """`mib` MiB of free memory malloc keeps resident: 64 KiB blocks (below its mmap threshold,
    so on the heap) written and freed, each pinned in place by a small block after it, as the
    profiler's events pin a step's freed activations. Returns the small blocks."""
    big, small = [], []
    for _ in range(mib * 16):
        big.append(libc.malloc(64 << 10))
        ctypes.memset(big[-1], 1, 64 << 10)  # resident
        small.append(libc.malloc(64))
    for block in big:
        libc.free(block)
    return small


calls: list[int] = []


def release() -> None:
    calls.append(1)
    release_freed_memory()


profiling.release_freed_memory = release  # type: ignore[assignment]
if heap_in_use_bytes() is None:
    print(json.dumps({"skip": "the heap in use cannot be read here (glibc mallinfo2)"}))
    raise SystemExit(0)
w = ProfilerWindow(
    Recording(cuda=False, shapes=False, stacks=False, memory=False), ProfileBounds(max_seconds=600)
)
w.start()
w.step()
before = list(calls)  # nothing held yet: nothing to give back, the pages stay mapped
small = holes(w._max_slack // MIB + 128)  # past what the process may hold (1/8, >= 64 MiB)
held = private_rss_bytes()
w.step()
seen = {
    "calls_before": before,
    "calls_after": list(calls),
    "given_back": held - private_rss_bytes(),
    "max_slack": w._max_slack,
    "event_bytes": w.event_bytes(),
}
w.discard()
for block in small:
    libc.free(block)
print(json.dumps(seen))
