"""Read a trace file's bytes (gunzipped), on the caller's thread or ahead of time on another one.

Light on imports, so a command can start reading before it imports the engine: file reads
and inflating let go of the GIL, so the read runs on a second core while the imports run.
Inflating uses ISA-L (the `isal` package) where it is installed, twice as fast as zlib on a
trace (40 ms against 80 for the 54 MB one); the standard library's zlib otherwise.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from pathlib import Path

from torchpace.errors import TraceError

_INFLATE_ERRORS: tuple[type[Exception], ...] = (OSError, EOFError, zlib.error)
try:
    from isal import igzip_lib

    _INFLATE_ERRORS += (igzip_lib.error,)  # type: ignore[operator]  # its stub: an instance
except ImportError:  # a platform without its wheel
    igzip_lib = None  # type: ignore[assignment]

EXPORT_HINT = "export it with prof.export_chrome_trace(path) or tensorboard_trace_handler(dir)"


def read_trace_bytes(path: Path) -> bytes:
    """The JSON bytes of one trace file, decompressed when gzipped; TraceError when unreadable."""
    if not path.exists():
        raise TraceError(f"{path}: no such file or directory; check the path")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(
            f"{path}: cannot be read ({exc.strerror}); check its permissions"
        ) from None
    if path.name.endswith(".gz") or data[:2] == b"\x1f\x8b":
        try:
            data = gunzip(data)
        except _INFLATE_ERRORS as exc:
            raise TraceError(
                f"{path.name} is not a valid gzip file ({exc}); re-copy or re-export the trace"
            ) from None
    if data.isspace() or not data:  # isspace stops at the first other byte; strip() would copy
        raise TraceError(f"{path.name} is empty; {EXPORT_HINT}")
    return data


def gunzip(data: bytes) -> bytes:
    """Decompress a gzip file into one buffer sized from its trailer (a third faster than growing).

    The trailer holds the size modulo 2**32; multi-member files or a wrong size take the slow path.
    """
    size = int.from_bytes(data[-4:], "little") if len(data) >= 18 else 0
    out = _inflate(data, max(size, 1 << 16))
    if len(out) % (1 << 32) != size:
        out = gzip.decompress(data)
    return out


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
