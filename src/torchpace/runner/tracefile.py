"""Writing the doctor's trace: gzip-compressed, streamed (never the whole JSON in memory).

TensorBoard's profiler plugin, Perfetto and `torchpace analyze` all read `.json.gz`; profiler JSON
compresses about 10x.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

_CHUNK = 8 << 20
# ISA-L's gzip at level 1 compresses profiler JSON ~10x at several hundred MB/s; zlib's level 1
# where ISA-L has no wheel (about 3x slower, similar ratio).
_LEVEL = 1


def _open_gzip(path: Path):  # type: ignore[no-untyped-def]
    try:
        from isal import igzip

        return igzip.open(path, "wb", compresslevel=_LEVEL)
    except ImportError:
        import gzip

        return gzip.open(path, "wb", compresslevel=_LEVEL)


def gzip_trace(src: Path, dest: Path, *, rename: Mapping[str, str] | None = None) -> None:
    """Compress `src` (profiler JSON) into `dest`, renaming events by exact name on the way.

    `rename` maps an event name to a new one (both plain strings: the JSON quotes around the name
    make the match exact, so "ProfilerStep#1" never matches "ProfilerStep#12").
    """
    pairs = [(f'"{a}"'.encode(), f'"{b}"'.encode()) for a, b in (rename or {}).items()]
    keep = max((len(a) for a, _ in pairs), default=1) - 1  # a name may straddle two chunks
    with open(src, "rb") as fin, _open_gzip(dest) as fout:
        tail = b""
        while True:
            chunk = fin.read(_CHUNK)
            data = tail + chunk
            for old, new in pairs:
                data = data.replace(old, new)
            if not chunk:
                fout.write(data)
                return
            cut = max(0, len(data) - keep)
            fout.write(data[:cut])
            tail = data[cut:]
