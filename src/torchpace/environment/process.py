"""This process's memory as the kernel counts it: one reader of /proc's `Key: N kB` lines, and
the peak resident memory, for the runner's memory readings and sensors and the bench."""

from __future__ import annotations

import resource
import sys


def proc_kib(path: str, key: str) -> int | None:
    """The bytes of a `Key:  N kB` line of a /proc file (status, meminfo); None where unreadable."""
    prefix = f"{key}:".encode()
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(prefix):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) * (1 if sys.platform == "darwin" else 1024)  # bytes on macOS, KiB on Linux
