"""A doctor run (one RunResult per rank from the runner) -> a Diagnosis: traces, live facts, notes.

Where the live runner (runner/) and the diagnosis engine (doctor/) meet: the traces the runner
recorded go through `torchpace.analyze` with what its sensors saw, and the run's own notes (how
steps were found, how the script ended, where the traces are) join the engine's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.doctor.conditions import cap_noisy
from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import sort_findings
from torchpace.runner.options import DoctorOptions
from torchpace.runner.run import RunResult
from torchpace.runner.sensors.inspection import ChildProcesses

if TYPE_CHECKING:
    from torchpace.doctor.diagnose import Thresholds


def children_sentence(c: ChildProcesses) -> str:
    """The training ran in processes the script started: say so, and what to run instead."""
    where = f" at {c.started_at}" if c.started_at else ""
    return (
        f"the training ran in {c.count} process(es) the script started itself{where} "
        f"(target {c.target}; {c.cpu_s:.1f} s of CPU there against {c.main_cpu_s:.1f} s in the "
        "main process), which torchpace doctor does not profile: the findings describe only "
        "the main process. To diagnose the training, run its function in the main process "
        "(e.g. one worker, without multiprocessing), or launch it with torchrun and use "
        "torchpace doctor --nproc-per-node N, or profile inside the worker with torch.profiler "
        "and run torchpace analyze on its trace"
    )


def run_notes(results: Sequence[RunResult], options: DoctorOptions) -> list[str]:
    """How steps were found, how the script ended, and where the traces are."""
    head = results[0]
    notes = [
        f"{head.step_note}; {options.warmup} warm-up step(s) skipped, "
        f"{head.steps_recorded} profiled"
    ]
    if head.inspection.model.steps:
        notes.append(
            f"live objects watched during the last {head.inspection.model.steps} warm-up "
            "step(s), outside the profiled ones"
        )
    for r in results:
        notes += [n for n in r.notes if n not in notes]
    children = head.inspection.child_processes
    if children is not None and children.did_the_work():
        notes.insert(0, children_sentence(children))
    if head.inspection.model.forward_bypass is not None:
        notes.append(head.inspection.model.unwatched_reason())
    failed = [r for r in results if r.exit_code != 0]
    if failed:
        code = failed[0].exit_code
        what = "was interrupted" if code == 130 else f"exited with status {code}"
        if failed[0].terminated:
            what = "was stopped by SIGTERM"
        shown = "; its traceback is shown above" if failed[0].error else ""
        notes.append(f"the script {what}{shown}; the report covers the steps captured before that")
    elif head.stopped_early:
        notes.append(
            "the doctor stopped the script after its profiled steps (--full lets it finish)"
        )
    traces = [t for r in results for t in r.trace_files]
    if traces:
        folder = os.path.dirname(traces[0]) or "."
        notes.append(
            f"trace{'s' if len(traces) > 1 else ''} written to {folder}/: open "
            f"{os.path.basename(traces[0])} in https://ui.perfetto.dev, or run "
            f"tensorboard --logdir {folder} (torch-tb-profiler)"
        )
    return notes


def doctor_diagnosis(
    results: Sequence[RunResult],
    options: DoctorOptions,
    *,
    only: list[str] | None = None,
    ignore: list[str] | None = None,
    thresholds: Thresholds | None = None,
) -> Diagnosis | None:
    """Diagnose every rank's trace with rank 0's live facts; None when no trace was recorded."""
    from torchpace.analysis import analyze
    from torchpace.doctor.registry import all_rules

    paths = [t for r in results for t in r.trace_files]
    if not paths:
        return None
    head = results[0]
    # In-process decoding (jobs=1): this process still holds the script's memory and may still
    # have its threads. The doctor's report is small next to its run: always carry the top
    # tables for HTML output.
    diagnosis = analyze(
        paths, only=only, ignore=ignore, jobs=1, thresholds=thresholds, top=True,
        live=head.inspection,
    )  # fmt: skip
    notes = [*run_notes(results, options), *diagnosis.notes, *head.inspection.notes]
    conditions = head.conditions
    findings = diagnosis.findings
    if conditions is not None:
        live_rules = frozenset(s.name for s in all_rules() if s.input == "live")
        findings = tuple(sort_findings(cap_noisy(findings, conditions, live_rules)))
    return replace(
        _with_torch(diagnosis, head.torch_version),
        notes=tuple(dict.fromkeys(notes)),
        findings=findings,
        conditions=conditions,
    )


def _with_torch(diagnosis: Diagnosis, version: str | None) -> Diagnosis:
    """The header names the torch the script ran with (the trace does not record it)."""
    if version is None:
        return diagnosis
    ranks = tuple(
        replace(view, info=replace(view.info, torch_version=view.info.torch_version or version))
        for view in diagnosis.ranks
    )
    info = replace(diagnosis.info, torch_version=diagnosis.info.torch_version or version)
    return replace(diagnosis, info=info, ranks=ranks)
