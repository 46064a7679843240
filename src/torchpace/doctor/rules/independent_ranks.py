"""The ranks of a multi-rank run never communicate in their steps: each trains a copy on its own.

Under torchrun every rank runs the script; unless the model is wrapped for data parallelism (DDP,
FSDP, a framework's strategy) the ranks train independent copies side by side. Seen on real
scripts: Hugging Face Trainer on CPU without `use_cpu`, and accelerate without `--cpu`, set up a
process group and then trained one whole copy per rank (every log line printed once per rank).
"""

from __future__ import annotations

from collections.abc import Sequence

from torchpace.doctor.facts import RankFacts
from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule
from torchpace.trace.summary import Phase

FIX = """\
# Data parallelism: every rank trains one shared model on its shard of the data
model = torch.nn.parallel.DistributedDataParallel(model)          # plain PyTorch
loader = DataLoader(dataset, sampler=DistributedSampler(dataset))  # each rank its own shard
# Hugging Face Trainer on CPU under torchrun: TrainingArguments(..., use_cpu=True)
# accelerate on CPU: accelerate launch --cpu ... (or Accelerator(cpu=True))
# Lightning: Trainer(strategy="ddp", devices=N)
# Lightning Fabric: Fabric(strategy="ddp", devices=N) (a bare Fabric() under torchrun on CPU
# runs one single-device copy per process)"""


def _trains(rank: RankFacts) -> bool:
    """Whether the rank's steps run backward passes (training, not inference)."""
    return rank.breakdown.median_phase_ms.get(Phase.BACKWARD, 0.0) > 0


@rule("independent-ranks", input="ranks")
def independent_ranks(ranks: Sequence[RankFacts]) -> list[Finding]:
    """Fire when every rank trains (backward passes) and none joins a collective in its steps."""
    if len(ranks) < 2:
        raise NotApplicable("one rank's trace: this needs every rank's", "analyze the folder")
    if not all(_trains(r) for r in ranks):
        return []  # inference ranks may well run apart (data-parallel serving)
    if any(r.communicates for r in ranks):
        return []
    n = len(ranks)
    steps = [round(r.breakdown.median_step_ms, 3) for r in ranks]
    return [
        Finding(
            rule="independent-ranks",
            severity=Severity.MEDIUM,
            summary=(
                f"The {n} ranks never communicate in their steps: no gradient is all-reduced, so "
                f"each rank trains its own copy of the model ({n - 1} of {n} ranks' compute "
                "repeats the same training unless each is meant to train its own model)"
            ),
            evidence={
                "ranks_count": n,
                "collectives_per_step": 0,
                "median_step_ms_per_rank": steps,  # type: ignore[dict-item]
                # Unknown where no process group was made (a bare Fabric() under torchrun).
                **({"backend_name": ranks[0].info.backend} if ranks[0].info.backend else {}),
            },
            fix=FIX,
            saving_method="not estimated: the ranks do not slow each other; the loss is whole "
            "ranks of repeated work",
            caveat="A run where each rank trains a model of its own (a seed or hyperparameter "
            "sweep under one launcher) is right as it is.",
        )
    ]
