"""The base of a benchmarked technique: a name, where it applies, and how it changes the run config."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from torchpace.bench.config import BenchSettings, Kind, RunConfig
from torchpace.bench.workloads.base import Workload
from torchpace.measure import Expect

# Relative loss difference still called "same math": fp32 kernels that sum in another order
# (autotuned convolutions, fused compiled kernels) drift by ~1e-6 per step, compounded over a run.
SAME_MATH_RTOL = 1e-3


class Technique:
    """One speed technique; the defaults describe one that applies everywhere and changes nothing."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # Techniques it needs to mean anything (persistent workers need workers); added when run alone.
    requires: ClassVar[tuple[str, ...]] = ()
    # At most one technique of a group (amp, batching) goes into the cumulative recipe.
    group: ClassVar[str | None] = None
    # False for trade-offs (checkpointing buys memory with time): measured alone, not stacked.
    in_recipe: ClassVar[bool] = True
    # How it changes the numbers the model computes; None means the same math.
    numerics: ClassVar[str | None] = None
    parity_rtol: ClassVar[float] = SAME_MATH_RTOL
    # False when per-step losses cannot be compared with the baseline (other batch composition).
    comparable: ClassVar[bool] = True
    # It can only add time (recomputation): a measured speedup means a disturbed measurement.
    cost_only: ClassVar[bool] = False
    # The RunConfig option it switches on, and to what ("" changes nothing).
    option: ClassVar[str] = ""
    value: ClassVar[Any] = True

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Whether it can help this workload on this device, and if not, why."""
        return True, ""

    def apply(self, config: RunConfig, settings: BenchSettings) -> RunConfig:
        """The run config with this technique switched on."""
        return replace(config, **{self.option: self.value}) if self.option else config

    def max_speedup(self, device: torch.device) -> tuple[float, str] | None:
        """The most it can gain on this device and why (a hardware ratio); None: no known bound."""
        return None

    def expect(self, device: torch.device) -> Expect:
        """What the measurement core may plausibly see from it on this device."""
        bound = self.max_speedup(device)
        why = bound[1] if bound else ("recomputes work" if self.cost_only else "")
        return Expect(self.cost_only, bound[0] if bound else None, why)

    def __repr__(self) -> str:
        return f"<technique {self.name}>"


def on_cuda(device: torch.device, reason: str) -> tuple[bool, str]:
    """Applies only on a CUDA device; otherwise the given reason."""
    return (True, "") if device.type == "cuda" else (False, reason)


@dataclass(frozen=True)
class Planned:
    """A configuration to measure (bench/harness.py plans them, peers match them): its row name,
    kind, techniques and run config."""

    name: str
    kind: Kind
    techniques: tuple[Technique, ...]
    config: RunConfig
