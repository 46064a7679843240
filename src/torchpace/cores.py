"""How many cores this process may use, how long this thread waited for one, the main thread's
CPU time and the whole machine's: one answer for the trace decoder, the worker-count policy, the
environment probe, the loaders, the doctor's sensors, the measurement core and the bench."""

from __future__ import annotations

import os
import threading
import time


def usable_cores() -> int:
    """Cores this process may run on: its affinity mask (a container's or taskset's limit), not
    the machine's count; os.cpu_count() where the platform has no affinity."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_ready_s() -> float | None:
    """Seconds this thread has spent ready to run but waiting for a CPU (on the run queue), from
    /proc/thread-self/schedstat (Linux's scheduler statistics: CPU time, run-queue wait and
    timeslices, in ns); None where it cannot be read. A thread's time is CPU + ready + blocked:
    what other processes' load adds is the ready time, so CPU + ready over wall time tells
    computing from waiting (I/O, sleep) whatever else the machine runs."""
    waits = thread_waits()
    return None if waits is None else waits[0]


def thread_waits() -> tuple[float, int] | None:
    """This thread's seconds ready to run but waiting for a CPU (thread_ready_s), and the times
    it was put on one (schedstat's timeslices: each wait for a core ends in one); None where
    /proc/thread-self/schedstat cannot be read."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            _, ready, slices = f.read().split()[:3]
        return int(ready) / 1e9, int(slices)
    except (OSError, ValueError):
        return None


def machine_busy_s() -> float | None:
    """CPU seconds every core of the machine has spent busy since boot, from /proc/stat: all but
    idle and iowait, less guest time (already counted in user and nice); None where unreadable."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if fields[:1] != [b"cpu"]:
        return None
    ticks = [int(x) for x in fields[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks) - idle - sum(ticks[8:10])) / os.sysconf("SC_CLK_TCK")


def main_thread_cpu_s() -> float | None:
    """CPU seconds the main thread has run, readable from any thread; None where it cannot be
    read. Unlike wall time it does not stretch with other processes' load."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(threading.main_thread().ident or 0))
    except (AttributeError, OSError, OverflowError, TypeError):
        return None


def idle_cores() -> int:
    """Usable cores that other processes leave idle (the 1-minute load average, whole runnable
    processes, taken off), at least 1: on a machine that is already busy, a process more to
    decode takes a core from others, and sending its work back costs more than it saves."""
    try:
        busy = int(os.getloadavg()[0])
    except OSError:  # no load average on this platform
        busy = 0
    return max(1, usable_cores() - busy)
