"""What a trace's figures cannot measure: durations that are all zero, said in the notes.

The decoder already drops ranges with a missing, negative or absurdly long duration
(torchpace.trace.tolerant counts them); what is left can still be all zeros, from a writer that
records no durations, or all below a nanosecond (1e-300 us), finer than any profiler times.
Then a step, a phase or GPU busy time would read as 0 ms, which is no measurement: the notes say
so, steps that short count as 0 ms (no step time, no share, no finding is read from them), and
the breakdown leaves GPU busy time unknown (see `measured`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import msgspec

from torchpace.trace.events import Step


class _Timed(Protocol):
    @property
    def dur_us(self) -> float: ...


# The finest duration a profiler records: Kineto writes microseconds with three decimals (1 ns);
# the shortest range in the 87 recorded traces here lasts 10 ns.
FINEST_US = 1e-3


def measured(events: Iterable[_Timed]) -> bool:
    """Whether any of the events has a duration (stops at the first: cheap on a real trace)."""
    return any(e.dur_us >= FINEST_US for e in events)


def as_measured(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """The steps, each 0 ms long when none lasts a nanosecond: what they measure."""
    if not steps or measured(steps):
        return steps
    return tuple(msgspec.structs.replace(s, dur_us=0.0) for s in steps)


def unmeasured_notes(
    steps: Sequence[Step], host: Sequence[_Timed], device: Sequence[Sequence[_Timed]]
) -> list[str]:
    """A note for each kind of figure whose durations are all zero (or under 1 ns)."""
    notes = []
    if steps and not measured(steps):
        notes.append(
            f"every one of the {len(steps)} steps lasts 0 ms (no duration of 1 ns or more "
            "recorded): step times cannot be measured"
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
