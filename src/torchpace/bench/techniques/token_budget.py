"""`token-budget`: batches sized by tokens, not samples: short sequences in big batches, long in small."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique
from torchpace.bench.techniques.bucketing import variable_length_only
from torchpace.bench.workloads.base import Workload


class TokenBudget(Technique):
    """A token-budget batch sampler: every batch holds about the same number of (padded) tokens."""

    name = "token-budget"
    summary = "TokenBudgetBatchSampler: constant tokens per batch, steady memory and step time"
    group = "batching"
    numerics = "batches are composed differently (sizes vary with length)"
    comparable = False
    option = "batching"
    value = "token-budget"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Needs variable-length samples."""
        return variable_length_only(workload)


TECHNIQUE = TokenBudget()
