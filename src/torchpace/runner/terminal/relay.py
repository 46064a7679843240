"""The relay: a small process between the doctored script and the terminal.

It reads what the script writes to stdout and stderr (a pipe, or a pseudo-terminal where the real
stream is a terminal, so the script still sees one), drops the profiler's own log lines from
stderr (noise.py), draws the doctor's progress line below the script's output, and writes the rest
unchanged. A process of its own, not a thread: when the doctored process is killed, the relay still
reads everything it wrote up to the end and then exits, so no output is lost.

Run as `python -m torchpace.runner.terminal.relay` by control.py, with the script's streams' read
ends and a control pipe on the listed file descriptors, and the real stdout and stderr as its own.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import select
import signal
import struct
import termios
import time
from dataclasses import dataclass, field

from torchpace.runner.terminal.noise import LineFilter
from torchpace.runner.terminal.status import ERASE, INTERVAL_S, render

_CHUNK = 65536
# How long the end of a line is held back waiting for its newline, so that the other stream's
# lines are not spliced into it (on one terminal, ~170 of 714k lines were); a line still
# unfinished after this (a progress bar redrawn with \r, a prompt) passes as it is.
HOLD_S = 0.1


@dataclass
class Source:
    """One of the script's streams: where it is read, where it goes, and its filter."""

    fd: int
    dest: int
    filter: LineFilter | None
    tty: bool  # a pseudo-terminal: its size follows the real terminal's
    partial: bytes = b""  # the end of a line not yet written (waiting for its newline)
    since: float = 0.0  # time.monotonic() when `partial` began


@dataclass
class Relay:
    """The relay's state: open sources, the progress line, and the terminal's cursor."""

    sources: list[Source]
    ctl: int | None  # progress messages from the doctor; None: no progress line
    ack: int | None  # written once the doctor's "done" has been handled
    message: str = ""
    started: float = field(default_factory=time.monotonic)
    shown: bool = False  # the progress line is on screen
    at_line_start: bool = True  # the last byte the script wrote was a newline
    tick: int = 0
    broken: set[int] = field(default_factory=set)  # destinations that can no longer be written

    def run(self) -> None:
        """Relay until every source is closed (the script and all its children are gone)."""
        while self.sources or self.ctl is not None:
            fds = [s.fd for s in self.sources] + ([self.ctl] if self.ctl is not None else [])
            try:
                ready, _, _ = select.select(fds, [], [], self._timeout())
            except InterruptedError:
                continue
            now = time.monotonic()
            for source in [s for s in self.sources if s.fd in ready]:
                self._pump(source, now)
            if self.ctl is not None and self.ctl in ready:
                self._control()
            for source in self.sources:
                if source.filter is not None:
                    self._emit(source.dest, source.filter.expire(now))
                if source.partial and now - source.since >= HOLD_S:
                    self._release(source)
            self._animate()

    def _timeout(self) -> float | None:
        holding = any(s.filter is not None and s.filter.holding for s in self.sources)
        if any(s.partial for s in self.sources):
            return min(INTERVAL_S, HOLD_S)
        return INTERVAL_S if (self.message and self.ctl is not None) or holding else None

    def _lines(self, source: Source, data: bytes, now: float) -> None:
        """Write whole lines (a `\r` ends a progress bar's line too); hold the rest back."""
        if not source.partial:
            source.since = now
        data = source.partial + data
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        source.partial = data[cut:]
        self._emit(source.dest, data[:cut])

    def _release(self, source: Source) -> None:
        partial, source.partial = source.partial, b""
        self._emit(source.dest, partial)

    def _pump(self, source: Source, now: float) -> None:
        try:
            data = os.read(source.fd, _CHUNK)
        except OSError as exc:  # EIO: a pseudo-terminal whose last writer closed it
            if exc.errno not in (errno.EIO, errno.EBADF):
                raise
            data = b""
        if not data:
            self.sources.remove(source)
            if source.filter is not None:
                self._lines(source, source.filter.flush(), now)
            self._release(source)
            os.close(source.fd)
            return
        if source.filter is not None:
            try:
                data = source.filter.feed(data, now)
            except Exception:  # never lose output to a filter's fault: pass it all on from now
                data = source.filter.flush() + data
                source.filter = None
        self._lines(source, data, now)

    def _control(self) -> None:
        assert self.ctl is not None
        data = os.read(self.ctl, _CHUNK)
        for line in data.decode("utf-8", "replace").splitlines():
            if line.startswith("S"):
                self.message = line[1:]
                self._draw()
            elif line == "Q":
                self._finish()
        if not data:  # the doctor is gone without saying so (killed)
            self._finish()

    def _finish(self) -> None:
        """The doctor is done: write what the script left in the streams, erase the progress
        line, and say so; the sources stay open for processes the script left running."""
        for source in list(self.sources):
            while source in self.sources and select.select([source.fd], [], [], 0)[0]:
                self._pump(source, time.monotonic())
            self._release(source)
        self._erase()
        self.message = ""
        if self.ctl is not None:
            os.close(self.ctl)
            self.ctl = None
        if self.ack is not None:
            _write(self.ack, b"k")
            os.close(self.ack)
            self.ack = None

    def _emit(self, dest: int, data: bytes) -> None:
        if not data or dest in self.broken:
            return
        self._erase()
        if not _write(dest, data):
            self.broken.add(dest)  # keep reading, so the script never blocks on a full pipe
        self.at_line_start = data.endswith(b"\n")
        self._draw()

    def _draw(self) -> None:
        """Show the progress line, unless the script's last line is unfinished (a progress bar
        of its own): the script's output wins."""
        if not self.message or self.ctl is None or not self.at_line_start or 2 in self.broken:
            return
        elapsed = time.monotonic() - self.started
        line = render(self.message, elapsed, self.tick, _columns(2))
        self.shown = _write(2, ERASE + line)

    def _erase(self) -> None:
        if self.shown:
            _write(2, ERASE)
            self.shown = False

    def _animate(self) -> None:
        if self.shown:
            self.tick += 1
            self._draw()

    def resize(self) -> None:
        """The terminal changed size: the pseudo-terminals take its size."""
        size = _winsize(2)
        if size is None:
            return
        for source in self.sources:
            if source.tty:
                fcntl.ioctl(source.fd, termios.TIOCSWINSZ, size)


def _write(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except InterruptedError:
            continue
        except OSError:
            return False
    return True


def _winsize(fd: int) -> bytes | None:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


def _columns(fd: int) -> int:
    size = _winsize(fd)
    cols = struct.unpack("HHHH", size)[1] if size else 0
    return cols or 80


def main(argv: list[str] | None = None) -> None:
    """Relay the file descriptors given on the command line (see control.py)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--out", type=int, help="the script's stdout, relayed to ours")
    p.add_argument("--err", type=int, help="the script's stderr, relayed to ours")
    p.add_argument("--filter", action="store_true", help="drop the profiler's lines from stderr")
    p.add_argument("--ctl", type=int, help="progress messages")
    p.add_argument("--ack", type=int, help="written once 'Q' has been handled")
    args = p.parse_args(argv)
    # Ctrl-C and a job manager's SIGTERM reach the whole process group: the relay outlives the
    # doctor and ends when the streams close, so their last lines still reach the terminal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sources = []
    for fd, dest in ((args.out, 1), (args.err, 2)):
        if fd is not None:
            keep = LineFilter() if args.filter and dest == 2 else None
            sources.append(Source(fd, dest, keep, os.isatty(fd)))
    relay = Relay(sources, args.ctl, args.ack)
    signal.signal(signal.SIGWINCH, lambda *_: relay.resize())
    try:
        relay.run()
    except Exception:  # a fault of the relay's own must cost the script no output
        _copy_on(relay)


def _copy_on(relay: Relay) -> None:
    """Plain copying of whatever is still open, until it closes."""
    for source in relay.sources:
        _write(source.dest, source.partial)
        if source.filter is not None:
            _write(source.dest, source.filter.flush())
    if relay.ack is not None:
        _write(relay.ack, b"k")
    open_fds = {s.fd: s.dest for s in relay.sources}
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [])
        for fd in ready:
            try:
                data = os.read(fd, _CHUNK)
            except OSError:
                data = b""
            if data:
                _write(open_fds[fd], data)
            else:
                del open_fds[fd]


if __name__ == "__main__":
    main()
