"""Read a trace file's bytes (gunzipped), on the caller's thread or ahead of time on another one.

Light on imports, so a command can start reading before it imports the engine: file reads
and inflating let go of the GIL, so the read runs on a second core while the imports run.
Inflating uses ISA-L (the `isal` package) where it is installed, twice as fast as zlib on a
trace (40 ms against 80 for the 54 MB one); the standard library's zlib otherwise.

Reads are bounded: only regular files are read (a FIFO would block for ever, /dev/zero never
end), and no trace is read or inflated past `max_trace_bytes()` of JSON, 4 GiB unless the
environment variable TORCHPACE_MAX_TRACE_SIZE says otherwise ("8G", "500M", or bytes). Decoding
needs about three times the JSON's size in memory.
"""

from __future__ import annotations

import gzip
import os
import re
import stat
import threading
import zlib
from pathlib import Path

from torchpace.errors import TraceError, UsageError

_INFLATE_ERRORS: tuple[type[Exception], ...] = (OSError, EOFError, zlib.error)
try:
    from isal import igzip_lib

    _INFLATE_ERRORS += (igzip_lib.error,)  # type: ignore[operator]  # its stub: an instance
except ImportError:  # a platform without its wheel
    igzip_lib = None  # type: ignore[assignment]

EXPORT_HINT = "export it with prof.export_chrome_trace(path) or tensorboard_trace_handler(dir)"


SIZE_VARIABLE = "TORCHPACE_MAX_TRACE_SIZE"
DEFAULT_MAX_BYTES = 4 << 30
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", re.I)
# Deflate cannot inflate one byte into more than 1032: a file this much smaller than the limit
# cannot inflate past it, and is inflated in one call into a buffer sized from its trailer.
_MAX_DEFLATE_RATIO = 1032
# ...but the trailer is only a claim (a 100-byte file can say 4 GiB): the first buffer is at
# most this many times the compressed size, twice the most any of the 87 recorded traces here
# inflates (30x); a trace that inflates more grows its buffer as it goes.
_TRACE_DEFLATE_RATIO = 64


def max_trace_bytes() -> int:
    """The most JSON one trace may hold: TORCHPACE_MAX_TRACE_SIZE, else 4 GiB."""
    text = os.environ.get(SIZE_VARIABLE, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    found = _SIZE.fullmatch(text)
    if found is None:
        raise UsageError(
            f"{SIZE_VARIABLE}={text!r} is not a size; give bytes or a size such as 8G or 500M"
        )
    power = " KMGT".index(found.group(2).upper() or " ")  # no unit: bytes
    return int(float(found.group(1)) * 1024**power)


def _too_large(path: Path, what: str, limit: int) -> TraceError:
    more = f"{-(-2 * limit // (1 << 30))}G"  # twice the limit, in whole GiB
    return TraceError(
        f"{path.name} {what} more than {_size(limit)}, the most torchpace reads of a trace; if "
        f"this machine has the memory (about 3x the JSON), raise the limit: {SIZE_VARIABLE}={more}"
    )


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


def read_trace_bytes(path: Path) -> bytes:
    """The JSON bytes of one trace file, decompressed when gzipped; TraceError when unreadable."""
    limit = max_trace_bytes()
    try:
        _check_regular(path, os.stat(path).st_mode)  # before opening: opening a device can act
    except FileNotFoundError:
        raise TraceError(_missing(path)) from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot be read ({exc.strerror}); check the path") from None
    try:
        # Non-blocking: a FIFO put in the file's place since the check does not wait for a writer.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            _check_regular(path, os.fstat(f.fileno()).st_mode)
            data = f.read(limit + 1)  # bounded even if the file grows while it is read
    except OSError as exc:
        raise TraceError(
            f"{path}: cannot be read ({exc.strerror}); check its permissions"
        ) from None
    if len(data) > limit:
        raise _too_large(path, "is", limit)
    if path.name.endswith(".gz") or data[:2] == b"\x1f\x8b":
        try:
            data = gunzip(data, limit)
        except _Overflow:
            raise _too_large(path, "inflates to", limit) from None  # a gzip bomb, or huge
        except _INFLATE_ERRORS as exc:
            raise TraceError(
                f"{path.name} is not a valid gzip file ({exc}); re-copy or re-export the trace"
            ) from None
    if data.isspace() or not data:  # isspace stops at the first other byte; strip() would copy
        raise TraceError(f"{path.name} is empty; {EXPORT_HINT}")
    return data


def json_size(path: Path) -> int:
    """About how many bytes of JSON the file holds, without inflating it: a gzip file's trailer
    (its size modulo 4 GiB, never taken below the file's own), else the file's size; 0 for one
    that cannot be looked at (reading it says why). What decoding costs grows with this."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not path.name.endswith(".gz") or size < 18:  # header 10 and trailer 8 bytes
                return size
            f.seek(-4, os.SEEK_END)
            return max(size, int.from_bytes(f.read(4), "little"))
    except OSError:
        return 0


def _check_regular(path: Path, mode: int) -> None:
    """TraceError unless `mode` is a regular file's: a FIFO would block, a device never end."""
    if not stat.S_ISREG(mode):
        raise TraceError(
            f"{path} is {_kind(mode)}, not a trace file; give a .json or .json.gz file "
            "(copy a stream to a file first)"
        )


def _missing(path: Path) -> str:
    if os.path.islink(path):
        return f"{path} is a symbolic link to {os.readlink(path)!r}, which does not exist; fix the link"
    return f"{path}: no such file or directory; check the path"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


class _Overflow(Exception):
    """The gzip data inflates past the limit."""


def gunzip(data: bytes, limit: int = DEFAULT_MAX_BYTES) -> bytes:
    """Decompress a gzip file, all its members, into at most `limit` bytes (_Overflow beyond).

    A file that cannot reach the limit is inflated in one buffer sized from its trailer (a
    third faster than growing one), never larger than the data can plausibly give; the trailer
    holds the size modulo 2**32, so multi-member files or a wrong size take the slow path. A
    larger one is inflated in bounded steps.
    """
    if len(data) * _MAX_DEFLATE_RATIO > limit:
        return _inflate_bounded(data, limit)
    size = int.from_bytes(data[-4:], "little") if len(data) >= 18 else 0
    out = _inflate(data, min(max(size, 1 << 16), len(data) * _TRACE_DEFLATE_RATIO))
    if len(out) % (1 << 32) != size:
        out = gzip.decompress(data)
    return out


def _inflate_bounded(data: bytes, limit: int) -> bytes:
    """Every gzip member of `data`, stopping with _Overflow as soon as the output passes `limit`."""
    out: list[bytes] = []
    total = 0
    while data:
        inflater = _inflater()
        out.append(inflater.decompress(data, limit + 1 - total))
        total += len(out[-1])
        if total > limit:
            raise _Overflow
        if not inflater.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        data = inflater.unused_data.lstrip(b"\x00")  # gzip allows zero padding between members
    return b"".join(out)


def _inflater() -> zlib._Decompress:
    if igzip_lib is not None:
        return igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_GZIP)  # type: ignore[return-value]
    return zlib.decompressobj(31)


def _inflate(data: bytes, size: int) -> bytes:
    """The first gzip member of `data` (checksum checked), in a buffer of `size` to start with."""
    if igzip_lib is not None:
        return igzip_lib.decompress(data, flag=igzip_lib.DECOMP_GZIP, bufsize=size)
    return zlib.decompress(data, 31, size)


class ReadAhead:
    """Reads one trace file on a daemon thread from construction; `result()` waits for it.

    For a caller with other work before it needs the bytes (a command importing the engine).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._data: bytes | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, name="torchpace-read", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            self._data = read_trace_bytes(self.path)
        except BaseException as exc:  # TraceError, or MemoryError...: raised again by result()
            self._error = exc

    def result(self) -> bytes:
        """The file's JSON bytes; raises what the read raised (TraceError...) in the caller's thread."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._data is not None
        return self._data
