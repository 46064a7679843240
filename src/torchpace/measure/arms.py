"""What the measurement core runs and what it gets back: arms, windows and timed runs.

An arm is anything that can run the same workload "for warm-up + N steps and give per-step times":
a bench configuration in this process, or the user's script started again with a fix switched on
(see torchpace.measure.process). The core never knows which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Window:
    """What one run must do: `warmup` unmeasured steps, then `steps` measured ones."""

    warmup: int
    steps: int
    round: int  # 0-based round of the interleaved schedule; -1 for the unrecorded priming run


@dataclass(frozen=True)
class Timed:
    """One run's measured steps.

    Args:
        step_ms: wall time of each measured step (after the warm-up), in milliseconds.
        units: work per step (samples, tokens) when steps differ in size (bucketed batches);
            None: steps are alike and are compared per step.
        payload: whatever else the caller measured (losses, memory); the core passes it through.
    """

    step_ms: tuple[float, ...]
    units: tuple[float, ...] | None = None
    payload: Any = None

    def __post_init__(self) -> None:
        if not self.step_ms:
            raise ValueError("a timed run needs at least one measured step; got none")
        if self.units is not None and len(self.units) != len(self.step_ms):
            raise ValueError(
                f"units per step ({len(self.units)}) and step times ({len(self.step_ms)}) differ"
            )

    def costs(self) -> list[float]:
        """Per-step cost: ms per unit of work when units are known, else ms per step."""
        if self.units is None:
            return list(self.step_ms)
        return [ms / u for ms, u in zip(self.step_ms, self.units, strict=True) if u > 0]


@dataclass(frozen=True)
class Expect:
    """What a change can plausibly do, so that a disturbed measurement is flagged, not reported.

    Args:
        cost_only: the change can only add time (activation checkpointing recomputes the
            forward): a measured speedup is implausible.
        max_speedup: the most it can gain here (a hardware ratio, e.g. bf16 over fp32 peak).
        why: the reason, in a few words, for the flag's text.
    """

    cost_only: bool = False
    max_speedup: float | None = None
    why: str = ""


@dataclass(frozen=True)
class Arm:
    """One thing to measure: a name, a callback that runs it for a window, and what to expect."""

    name: str
    run: Callable[[Window], Timed]
    expect: Expect = Expect()
