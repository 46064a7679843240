"""How many torch threads one process should use: one answer for the `cpu-threads` rule, its
`doctor --verify` applier, `torchpace env`, the worker policy's cores per rank and the doctor's own
torchrun launch (which must not trip the rule it is judged by)."""

from __future__ import annotations

import os
from dataclasses import dataclass


def local_ranks() -> int:
    """The ranks sharing this machine's cores: torchrun's LOCAL_WORLD_SIZE, else 1 (the worker
    policy, fast_loader, the profiler's memory budget and the load readings ask this)."""
    value = os.environ.get("LOCAL_WORLD_SIZE", "1")
    return max(1, int(value)) if value.isdigit() else 1


def cores_per_process(cores: int, local_ranks: int = 1) -> int:
    """The usable cores (torchpace.cores.usable_cores) shared out among the processes on this
    machine, at least one each; torch's threads should be this many: more wait for each other in
    every op."""
    return max(1, cores // max(1, local_ranks))


# The share of its step the training thread may wait ready to run, held off a core by other
# processes, before the step's shares stop describing the script: beside two busy loops on 2
# cores pytorch/examples' MNIST ran its 2-thread compute 7.1x slower (490 vs 69 ms a step) and
# its 1-thread loading 1.4x (31.7 vs 22.8 ms), its thread waiting 56% of the step for a core.
MIN_READY_FRACTION = 0.25


LOADING = "the step's compute more than its data loading"  # Contention.why's default
# What the load stretches more than the matmuls: each small op waits for its slowest thread.
SMALL_OPS = "the step's many small ops more than its matmuls and convolutions"


@dataclass(frozen=True)
class Contention:
    """torch's threads outnumbering the cores other processes left free, measured over the
    profiled steps."""

    used: int  # torch threads x ranks on this machine
    free: int  # cores the other processes left free
    waited: float  # share of the step the training thread waited ready to run, off a core

    def why(self, stretched: str = LOADING) -> str:
        """Why a share of the step was read under the load; `stretched`: what the load
        stretches more than the share's own work."""
        return (
            f"other processes held the cores ({self.used} torch thread(s) shared {self.free} "
            f"free core(s), and the training thread waited {self.waited:.0%} of its step for "
            f"one), which stretches {stretched}"
        )

    def enable(self) -> str:
        """How to get a share of the step that describes the script."""
        return f"run again on a quieter machine, or with torch.set_num_threads({self.free})"

    def unloaded(self, share: float) -> float:
        """A share of the step with the training thread's wait for a core taken out of it."""
        return share / (1.0 - self.waited) if self.waited < 1.0 else float("inf")

    def judged(self, share: float, stretched: str = LOADING) -> str:
        """The caveat of a finding judged on `unloaded(share)`: the step's compute stretched by
        the load more than the run-queue wait says, so the share without that wait is still at
        most what a quiet run measures (MNIST: 13.7% against 24% quiet, 6% as it read)."""
        return (
            f"Judged while {self.why(stretched)}: the share read {share:.1%} of the step, "
            f"{self.unloaded(share):.1%} with that wait taken out; a quiet run measures its size."
        )


def contention(
    threads: int,
    ranks: int,
    cores: int,
    others_cores: float,
    ready_ms_per_step: float,
    step_ms: float,
    min_ready_fraction: float = MIN_READY_FRACTION,
) -> Contention | None:
    """The contention, or None when torch's threads fit the free cores or hardly waited."""
    used = threads * max(1, ranks)
    free = max(1, int(cores - others_cores + 0.5))
    waited = ready_ms_per_step / step_ms
    if used <= free or waited < min_ready_fraction:
        return None
    return Contention(used, free, waited)
