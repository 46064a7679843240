"""How many processes may decode a trace: forking rules and core counts (standard library only).

Forking is safe only while no other thread runs (a child inherits the locks other threads hold)
and is done on Linux only. Below MIN_CHUNK_BYTES of JSON per process, forking and sending the
events back cost more than they save.
"""

from __future__ import annotations

import os
import sys
import threading

MIN_CHUNK_BYTES = 8 << 20


def can_fork() -> bool:
    """Whether this process may fork workers: Linux, and no other thread alive to hold a lock."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_for(size: int, jobs: int) -> int:
    """How many processes should decode `size` bytes: `jobs` (0: automatic, by cores and size)."""
    if jobs == 1 or not can_fork():
        return 1
    if jobs > 1:
        return jobs
    return max(1, min(usable_cores(), size // MIN_CHUNK_BYTES))
