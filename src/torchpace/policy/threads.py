"""How many torch threads one process should use: one answer for the `cpu-threads` rule, its
`doctor --verify` applier, `torchpace env`, the worker policy's cores per rank and the doctor's own
torchrun launch (which must not trip the rule it is judged by)."""

from __future__ import annotations


def cores_per_process(cores: int, local_ranks: int = 1) -> int:
    """The usable cores (torchpace.cores.usable_cores) shared out among the processes on this
    machine, at least one each; torch's threads should be this many: more wait for each other in
    every op."""
    return max(1, cores // max(1, local_ranks))
