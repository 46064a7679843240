"""Read trace files: `.json` / `.json.gz`, or a directory with one trace per rank.

Every failure is a TraceError with one line naming the file, what is wrong and what to do.
"""

from __future__ import annotations

import gc
import gzip
import re
import zlib
from pathlib import Path

import msgspec

from torchpace.errors import TraceError
from torchpace.trace._raw import DECODER, RawTrace
from torchpace.trace.model import Trace, build_trace

_EXPORT = "export it with prof.export_chrome_trace(path) or tensorboard_trace_handler(dir)"
_SUFFIXES = (".json", ".json.gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.I)


def _read_bytes(path: Path) -> bytes:
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
            data = _gunzip(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(
                f"{path.name} is not a valid gzip file ({exc}); re-copy or re-export the trace"
            ) from None
    if not data.strip():
        raise TraceError(f"{path.name} is empty; {_EXPORT}")
    return data


def _gunzip(data: bytes) -> bytes:
    """Decompress a gzip file into one buffer sized from its trailer (a third faster than growing).

    The trailer holds the size modulo 2**32; multi-member files or a wrong size take the slow path.
    """
    size = int.from_bytes(data[-4:], "little") if len(data) >= 18 else 0
    out = zlib.decompress(data, 31, max(size, 1 << 16))
    if len(out) % (1 << 32) != size:
        out = gzip.decompress(data)
    return out


def _decode(name: str, data: bytes) -> RawTrace:
    # Hundreds of thousands of small structs: the cyclic GC has nothing to find in them.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return DECODER.decode(data)
    except msgspec.ValidationError as exc:
        if not data.lstrip().startswith(b"{"):
            raise TraceError(
                f"{name} is not a torch.profiler trace: expected a JSON object with a "
                f"'traceEvents' list; {_EXPORT}"
            ) from None
        raise TraceError(
            f"{name} is not a torch.profiler trace: unexpected value ({exc}); {_EXPORT}"
        ) from None
    except msgspec.DecodeError as exc:
        raise TraceError(
            f"{name} is not valid JSON ({exc}): truncated or corrupt? re-copy or re-export it"
        ) from None
    finally:
        if enabled:
            gc.enable()


def load_trace(path: str | Path) -> Trace:
    """Load one torch.profiler trace file (`.json` or `.json.gz`) into a normalised Trace."""
    path = Path(path)
    if path.is_dir():
        raise TraceError(f"{path} is a directory; use load_traces() for one trace per rank")
    raw = _decode(path.name, _read_bytes(path))
    if raw.traceEvents is None:
        raise TraceError(
            f"{path.name} is not a torch.profiler trace: no 'traceEvents' list; {_EXPORT}"
        )
    if not raw.traceEvents:
        raise TraceError(
            f"{path.name} has no events: the profiler recorded nothing; check that the "
            "schedule's active steps ran (call prof.step() once per iteration)"
        )
    trace = build_trace(raw, str(path))
    if not trace.host_ops and not trace.has_gpu:
        raise TraceError(
            f"{path.name} has no profiled ranges (only metadata or instant events); record "
            "with torch.profiler.profile(activities=[ProfilerActivity.CPU, ...]) around the loop"
        )
    return trace


def _is_trace_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith(_SUFFIXES)


def _rank_key(trace: Trace) -> tuple[int, str]:
    rank = trace.info.rank
    if rank is None:
        found = _RANK_IN_NAME.search(Path(trace.info.path).name)
        rank = int(found.group(1)) if found else 1 << 30
    return rank, trace.info.path


def load_traces(path: str | Path) -> list[Trace]:
    """A file -> [its Trace]; a directory -> one Trace per trace file in it, sorted by rank."""
    path = Path(path)
    if not path.is_dir():
        return [load_trace(path)]
    files = sorted(p for p in path.iterdir() if _is_trace_file(p))
    if not files:
        raise TraceError(
            f"{path} holds no trace files (*.json, *.json.gz); point at the folder "
            "tensorboard_trace_handler wrote, or at one trace file"
        )
    return sorted((load_trace(f) for f in files), key=_rank_key)
