"""Fixtures for the input-pipeline tests: fail any test that leaves processes, threads or files."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterator

import pytest


def _children() -> set[int]:
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry))
    return found


def _snapshot() -> tuple[set[int], set[int], set[str], set[str]]:
    threads = {t.ident for t in threading.enumerate() if t.ident is not None}
    fds = set(os.listdir("/proc/self/fd"))
    shm = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    return _children(), threads, {f for f in fds if _is_file(f)}, shm


def _is_file(fd: str) -> bool:
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    return target.startswith("/") and not target.startswith(("/dev/", "/proc/"))


@pytest.fixture
def child_pids():
    """A function returning the live child processes of this test process."""
    return _children


@pytest.fixture
def leak_snapshot():
    """The function no_leaks compares before and after: (children, threads, files, /dev/shm)."""
    return _snapshot


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """Every worker process, thread and file a test opens is gone (within 10 s) after it."""
    before = _snapshot()
    yield
    deadline = time.monotonic() + 10
    collect = False
    while True:
        if collect:  # only when something is left: gc with torch loaded is not free
            gc.collect()
        collect = True
        after = _snapshot()
        extra = [now - then for now, then in zip(after, before, strict=True)]
        if not any(extra) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    names = ("worker processes", "threads", "open files", "/dev/shm files")
    leaks = {
        name: sorted(map(str, found)) for name, found in zip(names, extra, strict=True) if found
    }
    assert not leaks, f"the test left behind {leaks}"
