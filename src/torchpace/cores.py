"""How many cores this process may use: one answer for the trace decoder, the worker-count
policy, the environment probe, the loaders and the bench."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on: its affinity mask (a container's or taskset's limit), not
    the machine's count; os.cpu_count() where the platform has no affinity."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def idle_cores() -> int:
    """Usable cores that other processes leave idle (the 1-minute load average, whole runnable
    processes, taken off), at least 1: on a machine that is already busy, a process more to
    decode takes a core from others, and sending its work back costs more than it saves."""
    try:
        busy = int(os.getloadavg()[0])
    except OSError:  # no load average on this platform
        busy = 0
    return max(1, usable_cores() - busy)
