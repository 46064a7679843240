"""Turn a doctor run (one RunResult per rank) into a Diagnosis: traces, live facts and notes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.run import RunResult
from torchpace.doctor.session import DoctorOptions

if TYPE_CHECKING:
    from torchpace.doctor.diagnose import Thresholds


def run_notes(results: Sequence[RunResult], options: DoctorOptions) -> list[str]:
    """How steps were found, how the script ended, and where the traces are."""
    head = results[0]
    notes = [
        f"{head.step_note}; {options.warmup} warm-up step(s) skipped, "
        f"{head.steps_recorded} profiled"
    ]
    if head.inspection.steps_inspected:
        notes.append(
            f"live objects watched during the last {head.inspection.steps_inspected} warm-up "
            "step(s), outside the profiled ones"
        )
    for r in results:
        notes += [n for n in r.notes if n not in notes]
    failed = [r for r in results if r.exit_code != 0]
    if failed:
        code = failed[0].exit_code
        what = "was interrupted" if code == 130 else f"exited with status {code}"
        notes.append(
            f"the script {what}; its traceback is shown above; the report covers the "
            "steps captured before that"
        )
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
    from torchpace.doctor.diagnose import diagnose
    from torchpace.trace import load_trace

    paths = [t for r in results for t in r.trace_files]
    if not paths:
        return None
    traces = [load_trace(p) for p in paths]
    head = results[0]
    # The doctor's report is small next to its run: always carry the top tables for HTML output.
    diagnosis = diagnose(
        traces, only=only, ignore=ignore, live=head.inspection, top=True, thresholds=thresholds
    )
    notes = [*run_notes(results, options), *diagnosis.notes, *head.inspection.notes]
    return replace(diagnosis, notes=tuple(dict.fromkeys(notes)))
