"""torch's intra-op threads fitted to the cores of this process (cpu-threads), or to those other
processes leave free (cpu-contention), kept all run long."""

from __future__ import annotations

from torchpace.doctor.finding import Finding
from torchpace.policy.threads import cores_per_process
from torchpace.verify.appliers._calls import keep
from torchpace.verify.appliers.base import Applier, Context, Fix, Params


def _plan(finding: Finding, context: Context) -> list[Fix] | None:
    if finding.rule not in ("cpu-threads", "cpu-contention"):
        return None
    # On a busy machine the finding names the cores other processes left free.
    cores = finding.evidence.get("free_cores", finding.evidence.get("cores"))
    ranks = finding.evidence.get("world_size")
    if not isinstance(cores, int):
        return []
    threads = cores_per_process(cores, ranks if isinstance(ranks, int) else 1)
    if finding.evidence.get("torch_threads") == threads:
        return []  # the count it has (ranks of one thread each): nothing to measure
    return [Fix("threads", f"torch.set_num_threads({threads})", {"threads": threads})]


def _apply(params: Params) -> None:
    import torch

    keep(torch, "set_num_threads", int(params["threads"]))


THREADS = Applier("threads", _plan, _apply)
