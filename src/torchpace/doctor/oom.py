"""The report of a run that ran out of memory before any profiled step ended: no trace to judge,
the out-of-memory explained by its rule from what the memory sensor saw (rules/out_of_memory.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchpace.doctor.diagnosis import Diagnosis
    from torchpace.doctor.recording import Recording
    from torchpace.runner.sensors.inspection import Inspection

NO_TRACE = "(no trace: the script ran out of memory before a profiled step ended)"


def oom_diagnosis(live: Inspection, recording: Recording) -> Diagnosis:
    """The report of a run that ran out of memory before any profiled step ended: no trace to
    judge, the out-of-memory explained from what the sensors saw."""
    from torchpace.doctor.diagnose import diagnose
    from torchpace.trace._raw import RawHeader
    from torchpace.trace.model import build_trace
    from torchpace.trace.partial import normalise

    empty = build_trace(normalise([], RawHeader()), NO_TRACE)
    found = diagnose([empty], only=["out-of-memory"], live=live, top=True, recording=recording)
    # The empty trace's own notes (no ProfilerStep#, CPU-only) say nothing about this run.
    return replace(found, notes=tuple(dict.fromkeys((*recording.notes, *live.notes))))
