"""What a trace says about a run, as plain data: header facts and the step-time breakdown.

This is the contract between the trace engine (which fills it), rules (which read it) and reporters
(which render it). Times are milliseconds unless a name says otherwise.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal


class Phase(str, enum.Enum):
    """Where a step's host time goes; every step's phases add up to its duration."""

    DATALOADER = "dataloader"  # inside enumerate(DataLoader)#...__next__
    H2D = "h2d"  # host-to-device copies issued by the host (aten::to/copy_ to the device)
    SYNC = "sync"  # the host blocked on the device: synchronize calls and blocking copies
    FORWARD = "forward"
    BACKWARD = "backward"  # autograd engine (evaluate_function), incl. the backward() call
    OPTIMIZER = "optimizer"  # Optimizer.step#... and Optimizer.zero_grad#...
    OTHER = "other"


# How steps were delimited, said in every report header.
StepSource = Literal["profiler-step", "optimizer", "dataloader", "backward", "window"]
DeviceKind = Literal["cpu", "cuda", "rocm"]
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.I)
KernelClass = Literal[
    "gemm", "conv", "attention", "elementwise", "reduction", "communication", "copy", "other"
]


@dataclass(frozen=True)
class TraceInfo:
    """Facts about where and how the trace was recorded (the report header)."""

    path: str
    device_kind: DeviceKind
    device_name: str | None = None  # e.g. "Tesla V100-DGXS-32GB"; None for CPU-only
    compute_capability: tuple[int, int] | None = None
    # Where the compute capability comes from: the trace's deviceProperties, or (traces without
    # them) the newest architecture its kernel names were built for, a lower bound.
    compute_capability_source: Literal["deviceProperties", "kernel names"] | None = None
    device_memory_bytes: int | None = None
    torch_version: str | None = None  # rarely recorded in traces; filled when known
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None  # "nccl", "gloo", ...
    step_source: StepSource = "profiler-step"
    # How steps were found, in one sentence for the report header ("" when not said).
    step_detail: str = ""
    timestamp_unit: Literal["us", "ns"] = "us"
    vintage: str = ""  # e.g. "torch 1.9 (Operator/Kernel categories)" or "torch 2.x (cpu_op)"
    event_count: int = 0
    record_shapes: bool | None = None  # None: unknown
    profile_memory: bool | None = None
    notes: tuple[str, ...] = ()  # e.g. "no ProfilerStep# events; analysed as one window"


def rank_of(info: TraceInfo, position: int) -> int:
    """The rank a trace is: the one it recorded, else the one its file name says (`rank3`), else
    its position among the traces given. load_traces sorts a folder's files by it, and every
    label, table and cross-rank judgement names a trace by it."""
    if info.rank is not None:
        return info.rank
    named = _RANK_IN_NAME.search(os.path.basename(info.path))
    return int(named.group(1)) if named else position


def rank_key(info: TraceInfo) -> tuple[int, str]:
    """Where a trace goes among its run's traces: by rank_of, those of no rank last, by path."""
    return rank_of(info, 1 << 30), info.path


@dataclass(frozen=True)
class StepBreakdown:
    """One step's time, split by phase on the host and by busy/idle on the GPU."""

    index: int  # N in ProfilerStep#N, or the position when steps were inferred
    start_us: float
    duration_ms: float
    phase_ms: Mapping[Phase, float]  # adds up to duration_ms
    gpu_busy_ms: float | None = None  # union of kernel/copy/memset time on the device; None on CPU
    # Why this step is not typical ("3.1x the median: checkpoint?"); "" for a typical step.
    outlier: str = ""
    # Kernel time launched in this step, by kernel class; None on CPU.
    kernel_ms_by_class: Mapping[KernelClass, float] | None = None
    # How much of the GPU the step's kernels used (0-1; trace/occupancy.py): est. SM efficiency
    # (<= GPU busy share) and est. achieved occupancy; None where the trace does not record them.
    sm_efficiency: float | None = None
    achieved_occupancy: float | None = None
    # Why this step is warm-up or a one-off phase, not steady state (Step.warmup); "" if steady.
    warmup: str = ""
    # Batches fetched from DataLoaders in the step (None: not counted, e.g. built by hand).
    batches: int | None = None

    @property
    def gpu_idle_fraction(self) -> float | None:
        if self.gpu_busy_ms is None or self.duration_ms <= 0:
            return None
        return max(0.0, 1.0 - self.gpu_busy_ms / self.duration_ms)


def typical_of(steps: Sequence[StepBreakdown]) -> list[StepBreakdown]:
    """Steady steps that are not outliers; every step when none is (a trace of warm-up only:
    outliers are judged among steady steps, trace/outliers.py). The one answer to which steps
    are typical: Breakdown.typical, and Trace.typical_steps from it."""
    return [s for s in steps if not s.outlier and not s.warmup] or list(steps)


@dataclass(frozen=True)
class Breakdown:
    """Per-step breakdown plus figures over typical (non-outlier) steps: the median step, and
    time-weighted shares (a phase's or the GPU's time over the typical steps' time)."""

    steps: tuple[StepBreakdown, ...]
    median_step_ms: float
    median_phase_ms: Mapping[Phase, float]
    gpu_busy_fraction: float | None = None  # busy time / typical steps' time; None on CPU
    kernel_ms_by_class: Mapping[KernelClass, float] | None = None  # per step (median); None on CPU
    sm_efficiency: float | None = None  # weighted by step time; None when unrecorded
    achieved_occupancy: float | None = None  # weighted by busy time; None when unrecorded

    @property
    def typical(self) -> list[StepBreakdown]:
        """The steps every figure is over (typical_of)."""
        return typical_of(self.steps)

    def phase_share(self, phase: Phase) -> float:
        """The phase's share (0..1) of the typical steps' time (of the median step in ms)."""
        if self.median_step_ms <= 0:
            return 0.0
        return self.median_phase_ms.get(phase, 0.0) / self.median_step_ms
