"""What a trace's figures cannot measure: durations that are all zero, said in the notes.

The decoder already drops ranges with a missing or negative duration (torchpace.trace.tolerant
counts them); what is left can still be all zeros, from a writer that records no durations.
Then a step, a phase or GPU busy time would read as 0 ms, which is no measurement: the notes say
so, and the breakdown leaves GPU busy time unknown (see `measured`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from torchpace.trace.events import Step


class _Timed(Protocol):
    @property
    def dur_us(self) -> float: ...


def measured(events: Iterable[_Timed]) -> bool:
    """Whether any of the events has a duration (stops at the first: cheap on a real trace)."""
    return any(e.dur_us > 0 for e in events)


def unmeasured_notes(
    steps: Sequence[Step], host: Sequence[_Timed], device: Sequence[Sequence[_Timed]]
) -> list[str]:
    """A note for each kind of figure whose durations are all zero."""
    notes = []
    if steps and not measured(steps):
        notes.append(
            f"every one of the {len(steps)} steps lasts 0 ms (no duration recorded): step "
            "times cannot be measured"
        )
    if host and not measured(host):
        notes.append(
            f"none of the {len(host)} host ranges has a duration: time per phase and per op "
            "cannot be measured"
        )
    count = sum(len(lane) for lane in device)
    if count and not any(measured(lane) for lane in device):
        notes.append(
            f"none of the {count} GPU kernels, copies and memsets has a duration: GPU busy time "
            "cannot be measured"
        )
    return notes
