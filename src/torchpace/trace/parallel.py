"""Decode traces on several cores: one large file cut into chunks, or a folder's files, in forks.

msgspec decodes at C speed but holds the GIL, so threads cannot share the work; forked processes
can, and a fork shares the decompressed bytes (each process copies only its own chunk). Each
worker decodes and normalises its share and sends back the typed events as msgpack (a fraction
of the JSON's cost to read); the parent does one share itself meanwhile, then merges.

How many processes (workers_for): forking is safe only while no other thread runs (a child
inherits the locks other threads hold) and is done on Linux only; below MIN_CHUNK_BYTES of JSON
per process, forking and sending the events back cost more than they save; a core that other
processes keep busy (the load average) is not counted. A folder's work is the JSON its files
inflate to (the gzip trailer), not their compressed size. Where forking is unsafe or cannot pay
off the caller decodes serially.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from torchpace.cores import idle_cores
from torchpace.trace._raw import CHUNK_KEY
from torchpace.trace.partial import Partial
from torchpace.trace.read import json_size

Task = Callable[[], Any]  # a list of Partial | None (None: a piece it could not do), or as coded


class Codec(NamedTuple):
    """How a task's result crosses the pipe back: bytes out in the worker, the value back here."""

    encode: Callable[[Any], bytes]
    decode: Callable[[memoryview], Any]


# Decoded events: typed msgpack, a fraction of the JSON's cost to read.
PARTIALS = Codec(
    msgspec.msgpack.Encoder().encode, msgspec.msgpack.Decoder(list[Partial | None]).decode
)


class _Unreadable(Exception):
    """A worker's payload that does not decode."""


def _pickled(value: Any) -> bytes:
    import pickle  # here: only a folder's summaries cross by pickle (2 ms of every import)

    return pickle.dumps(value)


def _unpickled(payload: memoryview) -> Any:
    import pickle

    try:
        return pickle.loads(payload)
    except pickle.UnpicklingError as exc:
        raise _Unreadable(str(exc)) from None


# Anything picklable: what is kept of each rank (torchpace.doctor.summary), a few kB.
PICKLED = Codec(_pickled, _unpickled)
MIN_CHUNK_BYTES = 8 << 20


def can_fork() -> bool:
    """Whether this process may fork workers: Linux, and no other thread alive to hold a lock."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def workers_for(size: int, jobs: int) -> int:
    """How many processes should decode `size` bytes of JSON: `jobs` (0: automatic, by the
    cores other processes leave idle and MIN_CHUNK_BYTES a process)."""
    if jobs == 1 or not can_fork():
        return 1
    if jobs > 1:
        return jobs
    return max(1, min(idle_cores(), size // MIN_CHUNK_BYTES))


def workers_for_files(files: Sequence[Path], jobs: int) -> int:
    """How many processes should decode these files, one process per file at a time: by the
    JSON they hold (a gzip file's inflated size: a 64-rank folder of 8.5 MB gzipped is 1.2 GB
    of JSON), never more than there are files."""
    if jobs == 1 or len(files) < 2:
        return 1
    return min(len(files), workers_for(sum(json_size(f) for f in files), jobs))


_OK, _FAILED = b"\x00", b"\x01"
# The events array opens after this key; chunks are cut between two of its elements.
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BETWEEN = re.compile(rb"\}\s*,\s*\{")
_CHUNK_LIST = b'"' + CHUNK_KEY.encode() + b'":['


def cut(data: bytes, parts: int) -> list[tuple[int, int]] | None:
    """Byte ranges of `parts` chunks of the document, cut between two events of its array.

    Equal shares of the bytes after the array opens (measured: giving this process, which also
    merges, a smaller or larger share changed nothing beyond noise). The first chunk starts at
    the document's start (the keys before the array), the last ends at its end (the keys after
    it). None when the array is not found or holds too few separators.
    """
    found = _EVENTS_KEY.search(data)
    if found is None:
        return None
    first = found.end()
    ranges: list[tuple[int, int]] = []
    start = 0
    for k in range(1, parts):
        target = max(first + (len(data) - first) * k // parts, start + 1)
        gap = _BETWEEN.search(data, target)
        if gap is None:
            return None
        ranges.append((start, gap.start() + 1))  # through the `}` closing an event
        start = gap.end() - 1  # from the `{` opening the next one
    ranges.append((start, len(data)))
    return ranges


def chunk_doc(data: bytes, lo: int, hi: int) -> bytes:
    """Chunk [lo, hi) as a JSON document of its own (one copy of its bytes), its share of the
    events listed under CHUNK_KEY: a `traceEvents` key decoded from a chunk is a second list.

    A cut inside a string or a nested value leaves some chunk invalid JSON, so decoding it
    fails and the caller decodes the whole document instead.
    """
    view = memoryview(data)
    tail = b"" if hi == len(data) else b"]}"
    if lo > 0:
        return b"".join((b"{", _CHUNK_LIST, view[lo:hi], tail))
    found = _EVENTS_KEY.search(data, 0, hi)  # the list `cut` cut (the first): renamed
    assert found is not None, "cut() cuts only documents with a traceEvents list"
    return b"".join((view[: found.start()], _CHUNK_LIST, view[found.end() : hi], tail))


def run_parallel(tasks: Sequence[Task], codec: Codec = PARTIALS) -> list[Any]:
    """Run tasks[0] here and every other task in a forked worker; their results in task order,
    each sent back through `codec`.

    A worker that fails (its task raised, it crashed, or it could not be forked) gives None:
    the caller redoes that task itself, which also raises the real error. An exception of the
    parent's own task propagates, after the workers are stopped.
    """
    workers = [_Worker.start(task, codec) for task in tasks[1:]]
    try:
        mine = tasks[0]()
        return [mine, *(None if w is None else w.result() for w in workers)]
    finally:
        for w in workers:
            if w is not None:
                w.stop()


class _Worker:
    """A forked process running one task and sending its result back through a pipe."""

    def __init__(self, task: Task, codec: Codec) -> None:
        import fcntl  # POSIX only, like fork: workers exist only where can_fork() said so

        read_fd, write_fd = os.pipe()
        with contextlib.suppress(OSError):  # a 1 MB pipe: a sixteenth of the 64 kB round trips
            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            raise
        if pid == 0:
            os.close(read_fd)
            _serve(task, codec, write_fd)  # never returns
        os.close(write_fd)  # before the next fork: only this worker holds the write end
        self.pid, self.fd, self.codec = pid, read_fd, codec

    @classmethod
    def start(cls, task: Task, codec: Codec) -> _Worker | None:
        """A worker running `task`; None when no process could be made (limits, memory)."""
        try:
            return cls(task, codec)
        except OSError:
            return None

    def result(self) -> Any:
        """Wait for the worker's result; None when its task failed or it died."""
        with open(self.fd, "rb") as pipe:
            self.fd = -1  # the file object closes it now
            payload = pipe.read()
        os.waitpid(self.pid, 0)
        self.pid = 0
        if not payload.startswith(_OK):
            return None
        try:
            return self.codec.decode(memoryview(payload)[1:])
        except (msgspec.DecodeError, _Unreadable):
            return None

    def stop(self) -> None:
        """Close the pipe and kill and reap the worker, unless result() already did."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.pid:
            import signal  # only on this failure path: its import is 1.6 ms of every analyze

            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = 0


def _serve(task: Task, codec: Codec, write_fd: int) -> None:
    """The worker's whole life: run the task, send the result or the failure, exit at once."""
    gc.disable()  # short-lived; its objects go with it
    try:
        payload = _OK + codec.encode(task())
    except BaseException as exc:
        payload = _FAILED + repr(exc).encode()
    try:
        with open(write_fd, "wb") as out:
            out.write(payload)
    finally:
        os._exit(0)  # no atexit handlers, no flushing buffers inherited from the parent
