"""What the profiler itself writes to stderr, and a line filter that drops only that.

torch's C++ side logs straight to file descriptor 2 while the doctor records: Kineto's markers
around every recording, the allocator's note about memory allocated before recording started, and
the profiler's own warnings. None of it is the script's, and none of it is actionable under the
doctor, which owns the profiler; `torchpace doctor --verbose` shows it.

The filter never loses the script's output: it works on bytes (binary output passes unchanged),
drops whole lines matching a known pattern and nothing else, and holds back a partial line only
while it could still become one of them (C++ streams write a line in several pieces), for at most
`hold_s`; a partial line that cannot (a progress bar redrawn with '\\r') passes at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# One pattern per source, anchored at the start of a line; each names where it comes from.
NOISE = re.compile(
    rb"(?:"
    # Kineto's markers around every recording (torch >= 2.5):
    #   USDT:2026-11-23 22:00:21 7488:7488 SyncActivityProfilerHandler.cpp:52] profiler_start
    rb"USDT:\S+ \S+ \d+:\d+ \S+\.cpp:\d+\] profiler_\w+"
    # ...and its stage log in torch 2.0-2.2: STAGE:2023-... ActivityProfilerController.cpp:312]
    rb"|STAGE:\S+ \S+ \d+:\d+ \S+\.cpp:\d+\] Completed Stage"
    # Kineto when the recording starts in a thread other than the one that imported torch (the
    # doctor records in the script's training thread)
    rb"|ERROR: External init callback must run in same thread as registerClient"
    # Kineto asking a CUDA build of torch for GPUs on a machine with none (code 35: no driver):
    #   ERROR:2026-11-26 19:27:00 628:628 DeviceProperties.cpp:56] gpuGetDeviceCount failed ...
    rb"|ERROR:\S+ \S+ \d+:\d+ DeviceProperties\.cpp:\d+\] gpuGetDeviceCount failed"
    # c10 warnings from the allocator and the profiler about the recording itself:
    #   [W1123 22:13:16.808702953 CPUAllocator.cpp:245] Memory block of unknown size was ...
    rb"|\[W[^\]\n]*\bCPUAllocator\.cpp:\d+\] Memory block of unknown size"
    rb"|\[W[^\]\n]*\b(?:profiler_kineto|kineto_shim|profiler_python|collection)\.cpp:\d+\] "
    rb"(?!.*(?:CUPTI|rivilege|ERROR))"  # ...except what says the GPU could not be recorded
    rb")"
)
# How a noise line can begin: a partial line is held back only while it may still become one.
_STARTS = (b"USDT:", b"STAGE:", b"ERROR: External", b"ERROR:2", b"[W")


def is_noise(line: bytes) -> bool:
    """Whether a whole line (without its newline) is the profiler's own log."""
    return NOISE.match(line.rstrip(b"\r")) is not None


def may_become_noise(partial: bytes) -> bool:
    """Whether an unfinished line could still turn out to be noise once its newline comes."""
    return any(partial.startswith(s) or s.startswith(partial) for s in _STARTS)


@dataclass
class LineFilter:
    """Drops noise lines from a byte stream; everything else passes in order, byte for byte."""

    hold_s: float = 0.2  # the longest a partial line that may become noise is held back
    max_hold: int = 8192  # ...and the most bytes of it
    _held: bytes = b""
    _since: float = 0.0
    dropped: int = 0  # lines dropped so far

    def feed(self, data: bytes, now: float) -> bytes:
        """What of `data` (and of what was held) to write now."""
        if not data:
            return b""
        lines = (self._held + data).split(b"\n")
        tail = lines.pop()
        out = []
        for line in lines:
            if is_noise(line):
                self.dropped += 1
            else:
                out.append(line + b"\n")
        if tail and len(tail) < self.max_hold and may_become_noise(tail):
            if not self._held or lines:
                self._since = now  # a new partial line: its own time limit
            self._held = tail
        else:
            out.append(tail)
            self._held = b""
        return b"".join(out)

    @property
    def holding(self) -> bool:
        """Whether a partial line is held back."""
        return bool(self._held)

    def expire(self, now: float) -> bytes:
        """A held partial line, once it waited `hold_s` (the script wrote it without a newline)."""
        if self._held and now - self._since >= self.hold_s:
            return self.flush()
        return b""

    def flush(self) -> bytes:
        """Everything held, as it is (the stream ended)."""
        out, self._held = self._held, b""
        return out
