"""`torchpace.analyze(path)`: a torch.profiler trace, or a folder of per-rank traces, -> Diagnosis.

The one library path from trace files to a diagnosis: `torchpace analyze` calls it, `torchpace
doctor` calls it on the traces it recorded (with what it saw of the live script), and so can any
Python code. It reads top to bottom: start reading the file on a thread, import the rules
meanwhile, decode (on several cores where that pays off), run the rules.

Import-light on purpose (no torch, no numpy until the engine is needed): the command must finish
a 54 MB trace in under a second, and most of its start-up is imports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from torchpace.errors import TraceError, UsageError

if TYPE_CHECKING:
    from torchpace.doctor.diagnosis import Diagnosis
    from torchpace.doctor.recording import Recording
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.trace.model import Trace
    from torchpace.trace.read import ReadAhead

Path = str | os.PathLike[str]


def analyze(
    path: Path | Sequence[Path],
    *,
    only: Collection[str] | None = None,
    ignore: Collection[str] | None = None,
    jobs: int | None = None,
    thresholds: Mapping[str, Mapping[str, float]] | None = None,
    top: bool = False,
    progress: Callable[[str], None] | None = None,
    live: Inspection | None = None,
    recording: Recording | None = None,
) -> Diagnosis:
    """Diagnose the trace at `path`: a `.json`/`.json.gz` file, or a folder with one per rank,
    or a list of trace files (one per rank).

    Args:
        only, ignore: rule ids to run only, or to skip (`torchpace rules` lists them).
        jobs: processes that decode the trace(s): None or 0 as many as pay off on the usable
            cores, 1 this process only, N exactly N.
        thresholds: per-rule keyword overrides, e.g. `{"dataloader-stall": {"min_wait_fraction":
            0.2}}`.
        top: also compute the top kernels and operators tables (the HTML report shows them).
        progress: called with a short status ("reading PATH", "analysing PATH") as work goes on.
        live: what `torchpace doctor` saw of the live script (its runner's Inspection): the
            rules that judge live objects run too, and trace rules weigh it.
        recording: the tool recorded the traces (`torchpace doctor`, the callbacks): what its
            run measured is applied (doctor/recording.py).

    Raises TraceError for a file that cannot be read or analysed, UsageError for a negative
    `jobs`, RuleChoiceError (a ValueError) for an unknown rule or threshold or one out of its
    range. Without `live`, rules that inspect a live script (DataLoaders, model, flags) do not
    run.
    """
    paths = _paths(path, jobs)
    say = progress or _silent
    ahead = _read_ahead(paths[0]) if len(paths) == 1 else None  # reads while rules are imported
    from torchpace.doctor.diagnose import diagnose
    from torchpace.doctor.registry import check_choice

    # Imports every rule module while the file is read; a wrong rule id or threshold raises
    # RuleChoiceError (a ValueError) now, not after decoding.
    check_choice(only, ignore, thresholds)
    where = paths[0] if len(paths) == 1 else f"{len(paths)} traces"
    say(f"reading {where}")
    try:
        traces = _load(paths, jobs or 0, ahead)
        say(f"analysing {where}")
        return diagnose(
            traces, only=only, ignore=ignore, top=top, thresholds=thresholds, live=live,
            recording=recording,
        )  # fmt: skip
    except MemoryError:  # a trace this machine cannot hold: input too large, not a bug of ours
        raise TraceError(
            f"{where}: not enough memory to analyse it (decoding needs about 3x the JSON); free "
            "memory, or analyse one rank's file at a time"
        ) from None


def _paths(path: Path | Sequence[Path], jobs: int | None) -> list[str]:
    """The trace files given; UsageError for none, or for a negative `jobs`."""
    paths = (
        [os.fspath(path)] if isinstance(path, (str, os.PathLike)) else [os.fspath(p) for p in path]
    )
    if not paths:
        raise UsageError(
            "no trace given: pass a trace file, a folder of traces, or a list of files"
        )
    if jobs is not None and jobs < 0:
        raise UsageError(
            f"jobs={jobs}: give a number of processes (1 or more), or None for automatic"
        )
    return paths


def _load(paths: list[str], jobs: int, ahead: ReadAhead | None) -> list[Trace]:
    """One trace per file; a folder's traces, one per rank."""
    from torchpace.trace.load import load_trace, load_traces

    if ahead is not None:
        return [load_trace(paths[0], jobs=jobs, data=ahead.result())]
    if len(paths) == 1:
        return load_traces(paths[0], jobs=jobs)
    return [load_trace(p, jobs=jobs) for p in paths]


def _silent(message: str) -> None:
    """No progress to show."""


def _read_ahead(path: str) -> ReadAhead | None:
    """Start reading a single trace file on a thread; None for a folder (read later)."""
    if not os.path.isfile(path):
        return None
    from torchpace.trace.read import ReadAhead

    return ReadAhead(path)
