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
