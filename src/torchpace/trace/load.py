"""Read trace files: `.json` / `.json.gz`, or a directory with one trace per rank.

Every failure is a TraceError with one line naming the file, what is wrong and what to do. What
can be read is analysed: fields and events the strict schema refuses are read by the tolerant
decoder (torchpace.trace.tolerant), and a folder's unreadable files are left out with a note.
A document with two `traceEvents` lists reads as JSON parsers read it, the last one winning,
whether it is decoded in one process or in several.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import msgspec

from torchpace.errors import TraceError

# Inside torchpace.teardown.no_teardown (a short command), what is decoded lives until exit.
from torchpace.teardown import freed, keep
from torchpace.trace import parallel
from torchpace.trace._raw import CHUNK_DECODER, FAST_DECODER, RawEvent, RawHeader, split
from torchpace.trace.model import Trace, build_trace
from torchpace.trace.partial import Partial, merge, normalise
from torchpace.trace.read import EXPORT_HINT, read_trace_bytes
from torchpace.trace.summary import TraceInfo, rank_key

_SUFFIXES = (".json", ".json.gz")
T = TypeVar("T")


@contextlib.contextmanager
def _gc_off() -> Iterator[None]:
    # Hundreds of thousands of small structs: the cyclic GC has nothing to find in them.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# What sends a document from the fast decoder to the tolerant one (which words the errors).
_NOT_FAST = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def _decode(name: str, data: bytes) -> tuple[RawHeader, list[RawEvent] | None, list[str]]:
    """The document's header, events and notes on what could not be read: the fast decoder,
    else the tolerant one, whose errors say what is wrong with the file."""
    try:
        with _gc_off():
            header, events = split(FAST_DECODER.decode(data))
        return header, events, []
    except _NOT_FAST:
        pass
    from torchpace.trace import tolerant  # only for a document the fast decoder refuses

    with _gc_off():
        return tolerant.decode(name, data)


def load_trace(path: str | Path, *, jobs: int = 1, data: bytes | None = None) -> Trace:
    """Load one torch.profiler trace file (`.json` or `.json.gz`) into a normalised Trace.

    Args:
        jobs: processes that decode a large file: 1 (the default) only this one; 0 as many as
            pay off (usable cores, at most one per 8 MB of JSON); N exactly N. Needs Linux and
            no other thread running (see torchpace.trace.parallel); serial otherwise.
        data: the file's JSON bytes when already read (see torchpace.trace.read.ReadAhead).
    """
    path = Path(path)
    if os.path.isdir(path):
        raise TraceError(f"{path} is a directory; use load_traces() for one trace per rank")
    return _load_file(path, jobs, data)


def load_rank(path: str | Path, *, jobs: int = 1) -> Trace:
    """One rank's file of a folder (trace_files): load_trace, but an entry that is a folder is,
    like a FIFO or a device, no trace file (the note names it so), and nothing of it is kept
    till exit inside no_teardown (teardown.freed): a folder's ranks are each summarised and
    dropped, and 128 kept ranks would hold 10 GB."""
    with freed():
        return _load_file(Path(path), jobs)


def _load_file(path: Path, jobs: int, data: bytes | None = None) -> Trace:
    if data is None:
        data = read_trace_bytes(path)  # TraceError for what is not a readable regular file
    return _trace_of(path, _partial_of_file(path.name, data, jobs))


def _partial_of_file(name: str, data: bytes, jobs: int) -> Partial:
    """A whole file's normalised events: in chunks on several cores where that pays, else here."""
    workers = parallel.workers_for(len(data), jobs)
    if workers > 1:
        part = _decode_in_chunks(data, workers)
        if part is not None:
            return part
    header, events, notes = _decode(name, data)  # also the path that words every error
    if events is None:
        raise TraceError(
            f"{name} is not a torch.profiler trace: no 'traceEvents' list; {EXPORT_HINT}"
        )
    if not events and notes:
        raise TraceError(f"{name} has no event that can be read: {'; '.join(notes)}; re-export it")
    if not events:
        raise TraceError(
            f"{name} has no events: the profiler recorded nothing; check that the "
            "schedule's active steps ran (call prof.step() once per iteration)"
        )
    part = normalise(events, header, notes)
    keep(events)
    return part


def _decode_in_chunks(data: bytes, workers: int) -> Partial | None:
    """The document cut into one chunk per worker; None when it cannot be cut or a chunk fails."""
    ranges = parallel.cut(data, workers)
    if ranges is None:
        return None
    tasks = [functools.partial(_chunk, data, lo, hi) for lo, hi in ranges]
    try:
        results = parallel.run_parallel(tasks)
    except (*_NOT_FAST, _Uncut):
        return None  # this process's chunk was cut badly (or the file needs the tolerant decoder)
    if any(r is None for r in results):
        return None
    return merge([p for r in results if r for p in r if p is not None])


class _Uncut(Exception):
    """A chunk holds a second `traceEvents` list: only the whole document says which one wins."""


def _chunk(data: bytes, lo: int, hi: int) -> list[Partial | None]:
    """Decode and normalise one chunk (in a worker, or in this process for the first)."""
    with _gc_off():  # fast decoder only: a chunk it rejects sends the file down the serial path
        doc = CHUNK_DECODER.decode(parallel.chunk_doc(data, lo, hi))
    if doc.traceEvents:  # chunks hold their share of the list under another key
        raise _Uncut
    header, _ = split(doc)
    events: list[RawEvent] = doc.events or []
    keep(events)
    return [normalise(events, header)]


def _trace_of(path: Path, part: Partial) -> Trace:
    trace = build_trace(part, str(path))
    keep(trace)  # its typed events too: freeing 10^5 of them at the caller's return takes ~15 ms
    if not trace.host_ops and not trace.has_gpu and part.notes:
        raise TraceError(
            f"{path.name} has no profiled range that can be read: {'; '.join(part.notes)}"
        )
    if not trace.host_ops and not trace.has_gpu:
        raise TraceError(
            f"{path.name} has no profiled ranges (only metadata or instant events); record "
            "with torch.profiler.profile(activities=[ProfilerActivity.CPU, ...]) around the loop"
        )
    return trace


def load_traces(path: str | Path, *, jobs: int = 1) -> list[Trace]:
    """A file -> [its Trace]; a directory -> one Trace per trace file in it, sorted by rank.

    What a directory holds that cannot be read (a `config.json` beside the traces, one corrupt
    rank, a FIFO, a dangling link, other files) is left out, named in a note of every Trace;
    TraceError when no trace can be read. `jobs` as in load_trace; for a directory, files are
    shared out among the processes.
    """
    path = Path(path)
    if not os.path.isdir(path):  # False when it cannot be looked at: reading it says why
        return [load_trace(path, jobs=jobs)]
    files, others = trace_files(path)
    parts = _decode_files(files, jobs)
    done: list[Trace | str] = []
    for f in files:
        try:  # a file a worker could not do is done here, which words its error
            done.append(_trace_of(f, parts[f]) if f in parts else _load_file(f, jobs))
        except TraceError as exc:
            done.append(str(exc))
    return in_rank_order(path, done, others, _info, _noted)


def _info(trace: Trace) -> TraceInfo:
    return trace.info


def _noted(trace: Trace, notes: tuple[str, ...]) -> Trace:
    return replace(trace, info=replace(trace.info, notes=(*trace.info.notes, *notes)))


def trace_files(path: Path) -> tuple[list[Path], list[str]]:
    """A folder's trace files (named *.json, *.json.gz, one per rank) and the names of its other
    entries; TraceError when it cannot be listed or holds no trace file."""
    files, others = _listing(path)
    if not files:
        held = f" (it holds {_names(others)})" if others else ""
        raise TraceError(
            f"{path} holds no trace files (*.json, *.json.gz){held}; point at the folder "
            "tensorboard_trace_handler wrote, or at one trace file"
        )
    return files, others


def in_rank_order(
    path: Path,
    done: Sequence[T | str],
    others: list[str],
    info: Callable[[T], TraceInfo],
    noted: Callable[[T, tuple[str, ...]], T],
) -> list[T]:
    """A folder's ranks (Traces, or what was kept of each) sorted by rank, each noting the files
    left out: the error of each file given as a string, and the `others` not named like traces.
    TraceError when no file could be read."""
    ranks = [d for d in done if not isinstance(d, str)]
    errors = [d for d in done if isinstance(d, str)]
    if not ranks:
        raise TraceError(errors[0] if len(errors) == 1 else _none_readable(path, errors))
    if others:
        errors.append(f"{_names(others)}: not named *.json or *.json.gz")
    notes = tuple(f"left out of the analysis: {e}" for e in errors)
    if notes:
        ranks = [noted(r, notes) for r in ranks]
    return sorted(ranks, key=lambda r: rank_key(info(r)))


def _listing(path: Path) -> tuple[list[Path], list[str]]:
    """The folder's entries named like traces, whatever they are (reading one says what is
    wrong with it), and the names of the others; TraceError when it cannot be listed."""
    try:
        with os.scandir(path) as entries:
            names = sorted(e.name for e in entries)
    except OSError as exc:
        raise TraceError(
            f"{path}: cannot list the folder ({exc.strerror}); check its permissions "
            f"(chmod u+rx {path}) or give one trace file"
        ) from None
    files = [path / n for n in names if n.endswith(_SUFFIXES)]
    return files, [n for n in names if not n.endswith(_SUFFIXES)]


def _names(names: list[str], shown: int = 5) -> str:
    """`a.txt, b.log` or `a, b, c, d, e and 3 more`."""
    listed = ", ".join(names[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _none_readable(path: Path, errors: list[str]) -> str:
    shown = "; ".join(errors[:2]) + (f"; and {len(errors) - 2} more" if len(errors) > 2 else "")
    return f"{path}: none of its {len(errors)} trace files can be read: {shown}"


def _decode_files(files: list[Path], jobs: int) -> dict[Path, Partial]:
    """The files' normalised events, decoded in forked workers where that pays; a file that
    could not be done there (it is bad, or its worker failed) is missing from the result."""
    workers = parallel.workers_for_files(files, jobs)
    parts: dict[Path, Partial] = {}
    if workers > 1:
        groups = [files[i::workers] for i in range(workers)]
        results = parallel.run_parallel([functools.partial(_whole_files, g) for g in groups])
        for group, result in zip(groups, results, strict=True):
            parts.update((f, p) for f, p in zip(group, result or [], strict=False) if p is not None)
    return parts


def _whole_files(files: list[Path]) -> list[Partial | None]:
    """Each file's events; None for a file that cannot be read (its error is worded later)."""
    out: list[Partial | None] = []
    for f in files:
        try:
            out.append(_partial_of_file(f.name, read_trace_bytes(f), 1))
        except TraceError:
            out.append(None)
    return out
