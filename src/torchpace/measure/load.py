"""How busy the machine was while each run was measured: load average and other processes' CPU.

A timing on a shared machine is only as good as the quiet it was taken in. For every run the probe
records the 1-minute load average and the CPU time the whole machine spent (/proc/stat) minus what
this process and its reaped children spent (os.times): the cores other processes took meanwhile.
Where /proc/stat does not exist (macOS, Windows) only the load average is known.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from torchpace.cores import machine_busy_s, usable_cores
from torchpace.trace.stats import median

# "Too busy to measure": other processes took half of the cores this process may use, or
# (without /proc/stat) the load average is above 1.5 runnable tasks per core.
BUSY_OTHER_SHARE = 0.5
BUSY_LOAD_PER_CORE = 1.5


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@dataclass(frozen=True)
class LoadSample:
    """The machine's load over one measured run."""

    seconds: float
    load_avg_1m: float | None  # at the end of the run
    other_cores: float | None  # cores' worth of CPU other processes used during the run


class Probe(Protocol):
    """Measures the machine's load over a stretch of time: start(), then stop() -> LoadSample."""

    def start(self) -> None: ...

    def stop(self) -> LoadSample: ...


class MachineProbe:
    """The real probe: /proc/stat, os.times and os.getloadavg."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._start: tuple[float, float | None, float] = (0.0, None, 0.0)

    def start(self) -> None:
        """Remember the machine's and this process's CPU counters now."""
        self._start = (self.clock(), machine_busy_s(), _own_cpu_s())

    def stop(self) -> LoadSample:
        """The load since start()."""
        t0, busy0, own0 = self._start
        elapsed = max(self.clock() - t0, 1e-9)
        busy1 = machine_busy_s()
        others = None
        if busy0 is not None and busy1 is not None:
            others = max(0.0, (busy1 - busy0) - (_own_cpu_s() - own0)) / elapsed
        return LoadSample(elapsed, _loadavg(), others)


class NoProbe:
    """A probe that records nothing: for tests with synthetic samples."""

    def start(self) -> None:
        """Nothing to remember."""

    def stop(self) -> LoadSample:
        """An empty sample."""
        return LoadSample(0.0, None, None)


@dataclass(frozen=True)
class LoadSummary:
    """The load over a whole measurement, and whether it was too busy to trust small changes."""

    cores: int
    load_avg_1m: float | None  # median over runs
    other_cores: float | None  # median over runs
    other_cores_max: float | None
    busy: bool
    warning: str  # "" when the machine was quiet enough

    def line(self) -> str:
        """One line for report headers."""
        parts = [f"{self.cores} usable cores"]
        if self.other_cores is not None:
            parts.append(
                f"other processes used {self.other_cores:.1f} cores (median over runs, "
                f"max {self.other_cores_max or 0.0:.1f})"
            )
        if self.load_avg_1m is not None:
            parts.append(f"load average {self.load_avg_1m:.1f}")
        return "machine load: " + ", ".join(parts)


# complex: a busy machine judged from other processes' cores, or from the load average where those
# were not read.
def summarise(samples: Sequence[LoadSample], cores: int | None = None) -> LoadSummary:
    """Medians over the runs' samples, and a warning when the machine was busy.

    Busy: other processes took half the cores over the median run. Short bursts matter too: when
    a quarter of the runs or more were taken that way, the warning names how many.
    """
    cores = cores or usable_cores()
    loads = [s.load_avg_1m for s in samples if s.load_avg_1m is not None]
    others = [s.other_cores for s in samples if s.other_cores is not None]
    load = median(loads) if loads else None
    other = median(others) if others else None
    if other is not None:
        disturbed = sum(1 for x in others if x >= BUSY_OTHER_SHARE * cores)
        busy = other >= BUSY_OTHER_SHARE * cores or 4 * disturbed >= len(others)
        why = (
            f"other processes used {other:.1f} of {cores} cores while it measured"
            if other >= BUSY_OTHER_SHARE * cores
            else f"other processes took half the cores or more during {disturbed} of "
            f"{len(others)} runs"
        )
    else:
        busy = load is not None and load >= BUSY_LOAD_PER_CORE * cores
        why = f"the load average was {load or 0.0:.1f} on {cores} cores"
    warning = (
        f"the machine was too busy to measure well: {why}; intervals are wide and changes of a "
        "few percent cannot be told from noise. Measure again on a quieter machine."
        if busy
        else ""
    )
    return LoadSummary(cores, load, other, max(others) if others else None, busy, warning)
