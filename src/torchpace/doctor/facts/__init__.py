"""Facts about one trace that several rules read, each computed once per trace.

Rules judge; they do not measure what another rule measures. What more than one rule (or the
engine, or a report) reads is computed here, by the modules of this package:

    kernels      the typical steps' kernels as columns, kernels per launching op, GPU busy share
    device_steps the step's length and windows on the device (a GPU that lags the host)
    ops          matmul/convolution calls with their recorded shapes and dtypes
    collectives  collective time per step and its overlap with compute
    syncs        each place the host blocked on the device: cause, direction, cost
    idle         the GPU's idle time split by cause
    precision    the device's architecture, matmul/conv time by precision, a CPU run's math
    ranks        one rank's work and collective wait per step

`facts_of(trace)` gives the trace's `Facts`: each property is computed on first use and kept with
the trace, so the five rules reading the kernel columns share one computation. The modules'
functions compute and do not cache; call them through `Facts` (tests may call them directly).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TypeVar

from torchpace.doctor.facts.collectives import CommStats, comm_stats
from torchpace.doctor.facts.device_steps import DeviceSteps, device_steps
from torchpace.doctor.facts.idle import LAUNCH_GAP_US, IdleSplit, idle_split
from torchpace.doctor.facts.kernels import KernelColumns, gpu_busy_share, kernel_columns
from torchpace.doctor.facts.ops import MathOp, has_shapes, math_ops
from torchpace.doctor.facts.precision import CpuMath, cpu_math
from torchpace.doctor.facts.ranks import RankFacts, RankWork, measure_work
from torchpace.doctor.facts.syncs import SyncPoint, sync_points
from torchpace.doctor.registry import NotApplicable
from torchpace.trace.model import Trace
from torchpace.trace.summary import rank_of

__all__ = ["Facts", "RankFacts", "facts_of", "rank_facts", "rank_works", "ranks_of"]

_KEY = "doctor:facts"
T = TypeVar("T")


class Facts:
    """What the rules read of one trace, each fact computed on first use (see the module doc)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._idle: dict[float, IdleSplit | None] = {}

    @cached_property
    def kernels(self) -> KernelColumns:
        """The typical steps' kernels (those their own calls issued where the device lags the
        host); NotApplicable (each time asked) when the trace has none."""
        lag = self.device_steps
        return kernel_columns(self.trace, list(lag.windows) if lag.lags else None)

    @cached_property
    def device_steps(self) -> DeviceSteps:
        """The typical steps on the device: their windows and median length."""
        return device_steps(self.trace)

    @property
    def step_ms(self) -> float:
        """The median step, from the device's timeline where it lags the host (what the
        kernels' time per step is a share of)."""
        return self.device_steps.step_ms

    @cached_property
    def math_ops(self) -> list[MathOp]:
        """Every matmul/convolution call with recorded shapes, in trace order."""
        return math_ops(self.trace)

    @cached_property
    def has_shapes(self) -> bool:
        """Whether the trace recorded input shapes (record_shapes=True)."""
        return has_shapes(self.trace)

    @cached_property
    def comm(self) -> CommStats | None:
        """Collective time per step and its overlap with compute; None: no collectives."""
        return comm_stats(self.trace)

    @property
    def communicates(self) -> bool:
        """Whether any typical step holds collective time (kernels or host ranges): not only the
        median one. accelerate's examples/by_feature/local_sgd.py averages the parameters every
        8 steps (82 all-reduces in one of its 10 profiled steps) and read as ranks that never
        communicate."""
        return self.comm is not None

    @cached_property
    def sync_points(self) -> list[SyncPoint]:
        """Every place the host blocked on the device, by start."""
        return sync_points(self.trace)

    def idle_split(self, launch_gap_us: float = LAUNCH_GAP_US) -> IdleSplit | None:
        """The GPU's idle time by cause (gaps under `launch_gap_us` are launch latency)."""
        if launch_gap_us not in self._idle:
            self._idle[launch_gap_us] = idle_split(self.trace, self.sync_points, launch_gap_us)
        return self._idle[launch_gap_us]

    @property
    def gpu_busy_share(self) -> float:
        """The median step's GPU busy share, 1.0 when unknown (read from the breakdown, or over
        the device's windows where it lags the host)."""
        lag = self.device_steps
        return gpu_busy_share(self.trace, list(lag.windows) if lag.lags else None)

    @cached_property
    def cpu_math(self) -> CpuMath:
        """A CPU run's matmul/convolution host time per step, by dtype."""
        return cpu_math(self.trace)

    @cached_property
    def work(self) -> RankWork:
        """This trace's work and collective wait per step, under its recorded rank (0 if none)."""
        ops = self.math_ops if self.has_shapes else None
        return measure_work(self.trace, rank_of(self.trace.info, 0), self.comm, ops)


def facts_of(trace: Trace) -> Facts:
    """The trace's facts, created on first use and kept with the trace."""
    found = trace._cache.get(_KEY)
    if not isinstance(found, Facts):
        found = trace._cache[_KEY] = Facts(trace)
    return found


def rank_facts(trace: Trace, rank: int, *, measure: bool = True) -> RankFacts:
    """What the cross-rank judgement reads of `trace`, the rank `rank` (trace.summary.rank_of);
    without `measure`, its work and collectives are left unmeasured (NotApplicable when read)."""
    if not measure:
        unmeasured = NotApplicable("one rank's trace: no other rank to compare its work with")
        return RankFacts(trace.info, trace.breakdown, rank, unmeasured, unmeasured)
    facts = facts_of(trace)
    return RankFacts(
        trace.info,
        trace.breakdown,
        rank,
        _measured(lambda: facts.work),
        _measured(lambda: facts.communicates),
    )


def ranks_of(traces: Sequence[Trace]) -> list[RankFacts]:
    """Each trace's RankFacts, in the order given, under its rank (trace.summary.rank_of)."""
    return [rank_facts(t, rank_of(t.info, position)) for position, t in enumerate(traces)]


def _measured(measure: Callable[[], T]) -> T | Exception:
    try:
        return measure()
    except Exception as exc:  # raised again where the fact is read (RankFacts)
        return exc


def rank_works(ranks: Sequence[RankFacts]) -> list[RankWork]:
    """Every rank's work, in the order of `ranks`; NotApplicable where one's is not measurable."""
    return [r.work for r in ranks]
