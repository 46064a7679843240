"""`bucketing`: batch sequences of similar length together, so batches carry little padding."""

from __future__ import annotations

import torch

from torchpace.bench.technique import Technique
from torchpace.bench.workloads.base import Workload

NOT_VARIABLE = "samples all have the same shape; there is no padding to save"


def variable_length_only(workload: Workload) -> tuple[bool, str]:
    """Length-aware batching applies only to workloads whose samples vary in length."""
    if not workload.variable_length:
        return False, f"the {workload.name} workload's {NOT_VARIABLE}"
    return True, ""


class Bucketing(Technique):
    """A length-bucketing batch sampler: same batch size, far less padding."""

    name = "bucketing"
    summary = "BucketBatchSampler: batches of similar lengths, padded to their own longest"
    group = "batching"
    numerics = "batches are composed differently (the same samples, grouped by length)"
    comparable = False
    option = "batching"
    value = "bucket"

    def applies_to(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Needs variable-length samples."""
        return variable_length_only(workload)


TECHNIQUE = Bucketing()
