"""The doctor's side of the relay: route the script's streams through it, send progress, restore.

`Terminal.open(verbose=...)` decides what is needed: the profiler's lines are dropped from stderr
unless `verbose`; a progress line is drawn only when stdout and stderr are both terminals (then
stdout goes through the relay too, so the line never lands inside the script's output). Nothing
is needed: None, and the streams are left alone. A stream that is a terminal is replaced by a
pseudo-terminal, so the script still sees a terminal (colours, progress bars, line buffering).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import subprocess
import sys
import termios
import tty
from dataclasses import dataclass, field

_ACK_WAIT_S = 5.0  # how long close() waits for the relay to write what the script left
_EXIT_WAIT_S = 1.0  # ...and for it to end (it lives on while processes the script left write)


def wants_progress() -> bool:
    """A progress line on stderr: only when stdout and stderr are both terminals."""
    return os.isatty(1) and os.isatty(2) and os.environ.get("TERM") != "dumb"


def _stream_end(fd: int) -> tuple[int, int]:
    """(read end for the relay, write end for the script) standing in for `fd`."""
    if not os.isatty(fd):
        return os.pipe()
    master, slave = os.openpty()
    with contextlib.suppress(OSError, termios.error):
        tty.setraw(slave)  # bytes pass as written: the real terminal does the line discipline
        size = fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, size)  # the script sees the terminal's width
    return master, slave


@dataclass
class Terminal:
    """The script's stdout/stderr routed through the relay process (see relay.py)."""

    proc: subprocess.Popen[bytes]
    saved: dict[int, int]  # our stream -> a copy of what it was
    ctl: int | None  # progress messages; None: no progress line
    ack: int | None
    _closed: bool = field(default=False)

    @classmethod
    def open(cls, *, verbose: bool) -> Terminal | None:
        """Start the relay where it has work (see the module's docstring); None otherwise or
        where it cannot start (not POSIX, no file descriptors left): the streams stay as they are."""
        progress = wants_progress()
        if os.name != "posix" or (verbose and not progress):
            return None
        try:
            return cls._start(filter_noise=not verbose, progress=progress)
        except (OSError, subprocess.SubprocessError):
            return None

    @classmethod
    def _start(cls, *, filter_noise: bool, progress: bool) -> Terminal:
        _flush()
        ends = {fd: _stream_end(fd) for fd in ((1, 2) if progress else (2,))}
        ctl = os.pipe() if progress else None
        ack = os.pipe() if progress else None
        cmd = [sys.executable, "-m", "torchpace.runner.terminal.relay"]
        if 1 in ends:
            cmd += ["--out", str(ends[1][0])]
        cmd += ["--err", str(ends[2][0])] + (["--filter"] if filter_noise else [])
        passed = [r for r, _ in ends.values()]
        if ctl is not None and ack is not None:
            cmd += ["--ctl", str(ctl[0]), "--ack", str(ack[1])]
            passed += [ctl[0], ack[1]]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, pass_fds=passed)
        for fd in passed:
            os.close(fd)  # the relay's ends are the relay's
        saved = {fd: os.dup(fd) for fd in ends}
        for fd, (_, write_end) in ends.items():
            os.dup2(write_end, fd)
            os.close(write_end)
        term = cls(proc, saved, ctl[1] if ctl else None, ack[0] if ack else None)
        os.register_at_fork(after_in_child=term._forked)
        return term

    def stage(self, message: str) -> None:
        """Show `message` on the progress line (any thread; nothing without a progress line)."""
        if self.ctl is None or self._closed:
            return
        line = "S" + " ".join(message.split())[:400] + "\n"  # one write under PIPE_BUF: atomic
        with contextlib.suppress(OSError):
            os.write(self.ctl, line.encode("utf-8", "replace"))

    def close(self) -> None:
        """Put the streams back, let the relay write what the script left, erase the progress
        line; the report can then be written. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        _flush()
        for fd, saved in self.saved.items():
            os.dup2(saved, fd)  # our write ends close here: the relay reads to their end
            os.close(saved)
        if self.ctl is not None and self.ack is not None:
            with contextlib.suppress(OSError):
                os.write(self.ctl, b"Q\n")
                select.select([self.ack], [], [], _ACK_WAIT_S)
            for fd in (self.ctl, self.ack):
                os.close(fd)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(_EXIT_WAIT_S)

    def _forked(self) -> None:
        """In a process the script forked: its output still goes through the relay, but the
        progress line is the doctor's (the relay must see the doctor's end, not the child's)."""
        if self._closed:
            return  # closed before the fork: these numbers may name other files by now
        self._closed = True
        for fd in (self.ctl, self.ack, *self.saved.values()):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
