"""`torchpace.analyze(path)`: a torch.profiler trace, or a folder of per-rank traces, -> Diagnosis.

The one library path from trace files to a diagnosis: `torchpace analyze` calls it, `torchpace
doctor` calls it on the traces it recorded (with what it saw of the live script), and so can any
Python code. It reads top to bottom: start reading the file on a thread, import the rules
meanwhile, decode (on several cores where that pays off), run the rules. A folder of ranks goes
another way (_analyze_ranks): each rank is decoded and reduced to its summary where a worker
takes it (doctor/summary.py), so memory follows the workers, not the ranks (docs/scale.md).

Import-light on purpose (no torch, no numpy until the engine is needed): the command must finish
a 54 MB trace in under a second, and most of its start-up is imports.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path as FilePath
from typing import TYPE_CHECKING

from torchpace.errors import TraceError, UsageError

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from torchpace.doctor.diagnosis import Diagnosis
    from torchpace.doctor.recording import Recording
    from torchpace.doctor.summary import RankJob, RankSummary
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.trace.model import Trace
    from torchpace.trace.read import ReadAhead
    from torchpace.trace.summary import TraceInfo

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
    executor: Executor | None = None,
) -> Diagnosis:
    """Diagnose the trace at `path`: a `.json`/`.json.gz` file, or a folder with one per rank,
    or a list of trace files (one per rank).

    Args:
        only, ignore: rule ids to run only, or to skip (`torchpace rules` lists them).
        jobs: processes that decode the trace(s): None or 0 as many as pay off on the usable
            cores, 1 this process only, N exactly N.
        thresholds: per-rule keyword overrides, e.g. `{"gpu-idle": {"min_idle_fraction": 0.3}}`.
        top: also compute the top kernels and operators tables (the HTML report shows them).
        progress: called with a short status ("reading PATH", "analysing PATH") as work goes on.
        live: what `torchpace doctor` saw of the live script (its runner's Inspection): the
            rules that judge live objects run too, and trace rules weigh it.
        recording: the tool recorded the traces (`torchpace doctor`, the callbacks): what its
            run measured is applied (doctor/recording.py).
        executor: a concurrent.futures.Executor (a process pool, Dask's, Ray's: docs/scale.md)
            that summarises a folder's ranks, a task each; None: forked processes, by `jobs`.

    Raises TraceError for a file that cannot be read or analysed, UsageError for a negative
    `jobs`, RuleChoiceError (a ValueError) for an unknown rule or threshold or one out of its
    range. Without `live`, rules that inspect a live script do not run.
    """
    paths = _paths(path, jobs)
    say = progress or _silent
    single = len(paths) == 1 and not os.path.isdir(paths[0])
    ahead = _read_ahead(paths[0]) if single else None  # reads while rules are imported
    from torchpace.doctor.diagnose import diagnose
    from torchpace.doctor.registry import check_choice
    from torchpace.doctor.summary import RankJob

    check_choice(only, ignore, thresholds)  # imports the rules while the file is read
    where = paths[0] if len(paths) == 1 else f"{len(paths)} traces"
    say(f"reading {where}")
    try:
        if single:  # one rank: its Trace is kept, for the HTML report's tables too
            trace = _load_one(paths[0], jobs or 0, ahead)
            say(f"analysing {where}")
            return diagnose(
                trace, only=only, ignore=ignore, top=top, thresholds=thresholds, live=live,
                recording=recording,
            )  # fmt: skip
        job = RankJob(_names(only), _names(ignore), thresholds, live, jobs=jobs or 0)
        return _analyze_ranks(paths, job, top=top, executor=executor, say=say, recording=recording)
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


def _load_one(path: str, jobs: int, ahead: ReadAhead | None) -> Trace:
    from torchpace.trace.load import load_trace

    return load_trace(path, jobs=jobs, data=None if ahead is None else ahead.result())


def _names(rules: Collection[str] | None) -> tuple[str, ...] | None:
    return None if rules is None else tuple(rules)


def _analyze_ranks(
    paths: list[str],
    job: RankJob,
    *,
    top: bool,
    executor: Executor | None,
    say: Callable[[str], None],
    recording: Recording | None,
) -> Diagnosis:
    """A folder's ranks (or the files given, one per rank) summarised where each is decoded,
    then judged together; only the headline rank is loaded again, for the HTML report."""
    from torchpace.doctor.diagnose import judge_ranks
    from torchpace.doctor.registry import check_choice
    from torchpace.doctor.summary import RankSummary, select
    from torchpace.trace.load import in_rank_order, load_trace, trace_files
    from torchpace.trace.summary import rank_of

    if len(paths) == 1:  # a folder: what can be read of it, in rank order
        folder = FilePath(paths[0])
        files, others = trace_files(folder)
        done = _summaries([str(f) for f in files], job, executor)
        ranks = in_rank_order(folder, done, others, _info, RankSummary.noted)
    else:  # the files given, one per rank, in the order given: each must be readable
        done = _summaries(paths, job, executor)
        ranks = [d if not isinstance(d, str) else _raise(d) for d in done]
    ranks = [r.ranked(rank_of(r.facts.info, i)) for i, r in enumerate(ranks)]
    say(f"analysing {paths[0] if len(paths) == 1 else f'{len(paths)} traces'}")

    def headline(position: int) -> Trace:
        return load_trace(ranks[position].facts.info.path, jobs=job.jobs)

    given = check_choice(job.only, job.ignore, job.thresholds)
    specs = select(job.only, job.ignore)
    return judge_ranks(
        ranks, specs, given, live=job.live, headline=headline if top else None, recording=recording
    )


def _summaries(
    paths: list[str], job: RankJob, executor: Executor | None
) -> list[RankSummary | str]:
    """Each file's summary, or its error: on `executor`, in forked workers, or here."""
    import msgspec  # loaded with the engine by now; this module imports light

    if executor is not None:
        return list(executor.map(msgspec.structs.replace(job, jobs=1), paths))
    from torchpace.trace import parallel

    workers = parallel.workers_for_files([FilePath(p) for p in paths], job.jobs)
    if workers < 2:
        return [job(p) for p in paths]
    one = msgspec.structs.replace(job, jobs=1)  # a worker decodes its file itself: no forks
    groups = [list(range(len(paths)))[i::workers] for i in range(workers)]
    tasks = [functools.partial(_each, one, [paths[i] for i in g]) for g in groups]
    out: list[RankSummary | str] = [""] * len(paths)
    for group, result in zip(groups, parallel.run_parallel(tasks, parallel.PICKLED), strict=True):
        # A worker that failed (or died) has its files done here, which also words any error.
        for i, summary in zip(group, result or [job(paths[i]) for i in group], strict=True):
            out[i] = summary
    return out


def _each(job: RankJob, paths: list[str]) -> list[RankSummary | str]:
    return [job(p) for p in paths]


def _info(summary: RankSummary) -> TraceInfo:
    return summary.facts.info


def _raise(message: str) -> RankSummary:
    raise TraceError(message)


def _silent(message: str) -> None:
    """No progress to show."""


def _read_ahead(path: str) -> ReadAhead | None:
    """Start reading a single trace file on a thread; None for a folder (read later)."""
    if not os.path.isfile(path):
        return None
    from torchpace.trace.read import ReadAhead

    return ReadAhead(path)
