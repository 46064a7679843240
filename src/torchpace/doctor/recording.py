"""A recording the tool made, and what its run measured beside the traces: the engine's other input.

`torchpace analyze` on a user's files has none. `torchpace doctor` (checkup.py) and the training
callbacks own the profiler: they give `torchpace.analyze` a Recording, and the engine applies it
(the policies in doctor/passes.py, the header in doctor/diagnose.py), so that no caller changes
the Diagnosis after the engine returns it (only --verify adds what it measured).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchpace.runner.conditions import RunConditions


@dataclass(frozen=True)
class Recording:
    """Who recorded the traces (its profiler options were not the user's) and what it measured."""

    # The report's title: the command the doctor ran (`train.py --epochs 1`), or the callback's.
    title: str
    notes: tuple[str, ...] = ()  # the run's own notes, said before the engine's
    # The machine's load and the profiler's own cost (doctor/conditions.py caps a noisy run).
    conditions: RunConditions | None = None
    # Each rank's run-queue wait per profiled step: a cross-rank finding it explains is withheld.
    ready_ms: dict[int, float] = field(default_factory=dict)
    # The ranks the run's host ran (the doctor's own launch): with no more cores than ranks,
    # their collectives and their same work's pace are the scheduler's (doctor/conditions.py).
    ranks_here: int = 1
    # Why the ranks wait for none of the others (processes stepping one model in shared memory:
    # Hogwild): the cross-rank rules, which judge ranks that wait for each other, do not apply.
    apart: str = ""
    # Why the profiled window is short of what was asked, said first in the verdict ("" holds);
    # `short`: too short for step-time verdicts, which are withheld.
    caveat: str = ""
    short: bool = False
    torch_version: str | None = None  # the torch the script ran with (a trace does not say)
