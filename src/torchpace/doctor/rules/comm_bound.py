"""Collective communication takes a large share of each step."""

from __future__ import annotations

from torchpace.doctor.facts import facts_of
from torchpace.doctor.facts.collectives import (
    WAIT_CAVEAT,
    comm_evidence,
    one_bucket,
    require_comm,
)
from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import rule
from torchpace.trace.model import Trace

LESS_OFTEN = """\
# Communicate less often: accumulate gradients over N micro-batches, syncing only on the last
for i, batch in enumerate(micro_batches):
    ctx = model.no_sync() if i < len(micro_batches) - 1 else contextlib.nullcontext()
    with ctx:
        loss_fn(model(batch.inputs), batch.targets).backward()
optimizer.step()"""
FEWER_BYTES = """
# Communicate fewer bytes: all-reduce gradients in bf16
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
model.register_comm_hook(None, default_hooks.bf16_compress_hook)"""
FIX = LESS_OFTEN + FEWER_BYTES
FIX_GLOO_ON_GPU = """\
# GPU tensors are all-reduced by gloo through host memory: use NCCL for CUDA tensors
torch.distributed.init_process_group("nccl")   # torchrun sets the rest
"""
# Halving the bytes (bf16 gradients) or the number of all-reduces (no_sync over 2 micro-batches)
# halves the time spent in them.
REDUCTION = 0.5


@rule("comm-bound")
def comm_bound(trace: Trace, *, min_comm_fraction: float = 0.25) -> list[Finding]:
    """Fire when collectives take at least `min_comm_fraction` of the median step."""
    stats = require_comm(trace, facts_of(trace).comm)
    if stats is None or stats.comm_fraction < min_comm_fraction:
        return []
    gloo_on_gpu = trace.has_gpu and (trace.info.backend or "").lower() == "gloo"
    small = one_bucket(stats)  # latency-bound: fewer calls help, fewer bytes barely do
    fix = LESS_OFTEN if small else FIX
    fix = FIX_GLOO_ON_GPU + fix if gloo_on_gpu else fix
    return [
        Finding(
            rule="comm-bound",
            severity=Severity.MEDIUM,  # the policy's, from the saving (doctor/severity.py)
            summary=(
                f"Collectives take {stats.comm_ms:.1f} ms per step ({stats.comm_fraction:.0%} of "
                f"the step); {stats.exposed_ms:.1f} ms of it with no compute beside it"
                + (" (gloo on a GPU run)" if gloo_on_gpu else "")
            ),
            evidence=comm_evidence(trace, stats),
            fix=fix,
            saving_ms=round(stats.exposed_ms * REDUCTION, 3),
            saving_method=(
                f"exposed collective time x 0.5 (no_sync over 2 micro-batches halves the "
                f"all-reduces; {stats.bytes_per_step or 0:,.0f} bytes a step cost their latency, "
                "not their bytes): an estimate"
                if small
                else "exposed collective time x 0.5 (bf16 gradients halve the bytes; no_sync "
                "over 2 micro-batches halves the all-reduces): an estimate"
            ),
            caveat=WAIT_CAVEAT if (trace.info.world_size or 1) > 1 else "",
        )
    ]
