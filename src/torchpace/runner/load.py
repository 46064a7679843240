"""The machine under the run: this process's memory and CPU time, and how busy the machine is.

Linux reads /proc (cheap: one small file per reading, safe from any thread); elsewhere the
readings degrade to what the standard library offers, or None ("not measured").
"""

from __future__ import annotations

import ctypes
import functools
import os
import time
from dataclasses import dataclass
from typing import Any

from torchpace.cores import machine_busy_s
from torchpace.environment.process import peak_rss_bytes, proc_kib
from torchpace.policy.threads import local_ranks

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def rss_bytes() -> int:
    """This process's resident memory now (its peak where /proc is missing)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return peak_rss_bytes()


def private_rss_bytes() -> int:
    """This process's resident private anonymous memory (its heap: where the profiler keeps its
    events); shared memory (tensors moved to it for torch.multiprocessing) and mapped files are
    left out. The whole RSS where /proc/self/status has no RssAnon (before Linux 4.5)."""
    found = proc_kib("/proc/self/status", "RssAnon")
    return rss_bytes() if found is None else found


def available_bytes() -> int | None:
    """Memory this process could still take before the machine (or its cgroup: a container, a
    Slurm job) runs out: MemAvailable, and the cgroup's limit less its usage where that is lower;
    None where neither can be read (macOS)."""
    read = (proc_kib("/proc/meminfo", "MemAvailable"), _cgroup_headroom())
    found = [b for b in read if b is not None]
    return min(found) if found else None


def _cgroup_headroom() -> int | None:
    """limit - usage of this process's cgroup (v2, else v1); None when unlimited or unreadable."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:  # v2: 0::/path
            base = "/sys/fs/cgroup" + path.rstrip("/")
            return _headroom(f"{base}/memory.max", f"{base}/memory.current")
        if "memory" in controllers.split(","):
            base = "/sys/fs/cgroup/memory" + path.rstrip("/")
            return _headroom(f"{base}/memory.limit_in_bytes", f"{base}/memory.usage_in_bytes")
    return None


def _headroom(limit_file: str, usage_file: str) -> int | None:
    try:
        with open(limit_file, "rb") as f:
            limit = f.read().strip()
        with open(usage_file, "rb") as f:
            usage = int(f.read().strip())
    except (OSError, ValueError):
        return None
    if limit == b"max" or not limit.isdigit() or int(limit) >= 1 << 60:  # v1's "unlimited"
        return None
    return max(0, int(limit) - usage)


def release_freed_memory() -> None:
    """Hand the heap's free memory back to the OS (glibc's malloc_trim; elsewhere nothing).

    The profiler's events are many small allocations: once freed, malloc keeps their pages, and
    the steps that follow (timed, or the script's rest under --full) and the analysis then come on
    top. On torch 2.13 a 4-step GPT recording left 436 MB resident after it was freed; trimming
    gave it back."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost",
        )
    ]  # fmt: skip


def heap_in_use_bytes() -> int | None:
    """Bytes in live heap allocations now (glibc >= 2.33: mallinfo2's uordblks + hblkhd), not
    the freed memory malloc keeps; None elsewhere. It walks malloc's free lists: call it at step
    boundaries, not on every tick."""
    mallinfo2 = _mallinfo2()
    if mallinfo2 is None:
        return None
    info = mallinfo2()
    return int(info.uordblks + info.hblkhd)


@functools.cache
def _mallinfo2() -> Any:
    """glibc's mallinfo2, looked up once; None where the C library has none."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2
    return mallinfo2


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds used by a process and, recursively, its live children (DataLoader workers)."""
    total = 0.0
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            children = [int(c) for c in f.read().split()]
    except (OSError, IndexError, ValueError):
        return total
    return total + sum(_tree_cpu_s(c) for c in children)


@dataclass(frozen=True)
class LoadSample:
    """A reading of the machine's and this process tree's CPU use."""

    t: float  # time.monotonic()
    machine_busy_s: float | None
    own_busy_s: float  # this job's CPU seconds (`job_root`'s process tree)


# Set by the doctor in each process the script spawns (runner/spawned.py): its parent's pid, whose
# tree holds the sibling processes.
SPAWNED_BY = "TORCHPACE_SPAWNED_BY"


def job_root() -> int:
    """The process whose tree is this job on this machine: under torchrun with several local
    ranks, the agent that started them all (its children are the sibling ranks and their
    DataLoader workers), or the script that started this process and its siblings with
    torch.multiprocessing.spawn; otherwise this process.

    Counted as "other processes", a 2-rank gloo job's sibling rank kept 0.9 of 2 cores busy on a
    quiet machine, so every torchrun run read as busy, and cpu-contention counted the ranks twice
    (as ranks, and as others' load)."""
    if local_ranks() > 1 and "TORCHELASTIC_RUN_ID" in os.environ and os.getppid() > 1:
        return os.getppid()
    if os.environ.get(SPAWNED_BY) == str(os.getppid()):  # one of the processes mp.spawn started
        return os.getppid()
    return os.getpid()


def sample_load() -> LoadSample:
    """Read the counters that `others_cores` compares."""
    return LoadSample(time.monotonic(), machine_busy_s(), _tree_cpu_s(job_root()))


def others_cores(start: LoadSample, end: LoadSample) -> float | None:
    """Cores kept busy by other processes between two samples (None where /proc is missing).

    The machine's busy time minus this job's (the script, its threads, its DataLoader workers and,
    under torchrun, its sibling ranks: `job_root`), divided by the wall time between the samples.
    """
    if start.machine_busy_s is None or end.machine_busy_s is None:
        return None
    wall = end.t - start.t
    if wall <= 0:
        return None
    machine = end.machine_busy_s - start.machine_busy_s
    own = end.own_busy_s - start.own_busy_s
    return max(0.0, (machine - own) / wall)


def load_average() -> float | None:
    """The 1-minute load average (runnable processes, this one included)."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds a live process (and its children) has used; None once it is gone."""
    if not os.path.exists(f"/proc/{pid}"):
        return None
    return _tree_cpu_s(pid)
