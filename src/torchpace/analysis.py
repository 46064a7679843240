"""`torchpace.analyze(path)`: a torch.profiler trace, or a folder of per-rank traces, -> Diagnosis.

The one library path from a trace file to a diagnosis: `torchpace analyze` calls it, and so can
any Python code. It reads top to bottom: start reading the file on a thread, import the rules
meanwhile, decode (on several cores where that pays off), run the rules.

Import-light on purpose (no torch, no numpy until the engine is needed): the command must finish
a 54 MB trace in under a second, and most of its start-up is imports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from torchpace.errors import TraceError, UsageError

if TYPE_CHECKING:
    from torchpace.doctor.diagnosis import Diagnosis
    from torchpace.trace.read import ReadAhead


def analyze(
    path: str | os.PathLike[str],
    *,
    only: Collection[str] | None = None,
    ignore: Collection[str] | None = None,
    jobs: int | None = None,
    thresholds: Mapping[str, Mapping[str, float]] | None = None,
    top: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Diagnosis:
    """Diagnose the trace at `path`: a `.json`/`.json.gz` file, or a folder with one per rank.

    Args:
        only, ignore: rule ids to run only, or to skip (`torchpace rules` lists them).
        jobs: processes that decode the trace(s): None or 0 as many as pay off on the usable
            cores, 1 this process only, N exactly N.
        thresholds: per-rule keyword overrides, e.g. `{"dataloader-stall": {"min_wait_fraction":
            0.2}}`.
        top: also compute the top kernels and operators tables (the HTML report shows them).
        progress: called with a short status ("reading PATH", "analysing PATH") as work goes on.

    Raises TraceError for a file that cannot be read or analysed, UsageError for a negative
    `jobs`, ValueError naming the known ones for an unknown rule or threshold. Rules that
    inspect a live script (DataLoaders, model, flags: `torchpace doctor`) do not run on a trace.
    """
    path = os.fspath(path)
    if jobs is not None and jobs < 0:
        raise UsageError(
            f"jobs={jobs}: give a number of processes (1 or more), or None for automatic"
        )
    say = progress or _silent
    ahead = _read_ahead(path)  # reads while the rules are imported
    from torchpace.doctor.diagnose import diagnose
    from torchpace.doctor.registry import all_rules, get_rule
    from torchpace.trace.load import load_trace, load_traces

    all_rules()  # imports every rule module while the file is read
    for name in [*(only or ()), *(ignore or ())]:
        get_rule(name)  # an unknown id: ValueError now, not after decoding
    say(f"reading {path}")
    try:
        if ahead is not None:
            traces = [load_trace(path, jobs=jobs or 0, data=ahead.result())]
        else:
            traces = load_traces(path, jobs=jobs or 0)
        say(f"analysing {path}")
        return diagnose(traces, only=only, ignore=ignore, top=top, thresholds=thresholds)
    except MemoryError:  # a trace this machine cannot hold: input too large, not a bug of ours
        raise TraceError(
            f"{path}: not enough memory to analyse it (decoding needs about 3x the JSON); free "
            "memory, or analyse one rank's file at a time"
        ) from None


def _silent(message: str) -> None:
    """No progress to show."""


def _read_ahead(path: str) -> ReadAhead | None:
    """Start reading a single trace file on a thread; None for a folder (read later)."""
    if not os.path.isfile(path):
        return None
    from torchpace.trace.read import ReadAhead

    return ReadAhead(path)
