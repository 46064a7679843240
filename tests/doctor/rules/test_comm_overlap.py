"""comm-overlap: collective time that no compute overlaps."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_traces import gpu_builder, ranks, recorded, write

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.comm_overlap import comm_overlap

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"


def test_one_bucket_of_gradients_has_nothing_to_overlap() -> None:
    """The recorded gloo runs all-reduce 1,044,008 bytes a step in one call (DDP's first 1 MiB
    bucket, after backward ends): bucket_cap_mb and static_graph cannot overlap it (the rule
    said they could, and offered the backward pass as the saving)."""
    rank0, _ = ranks("straggler_seqlen")
    with pytest.raises(NotApplicable, match="1,044,008 bytes a step, one DDP bucket"):
        comm_overlap(rank0)


def test_silent_on_recorded_nccl_a100() -> None:
    assert comm_overlap(recorded("nccl/nccl_a100")) == []


def test_overlapped_nccl_kernels_are_not_exposed(tmp_path: Path) -> None:
    b = gpu_builder(8, 0)
    for n in range(3):
        base = n * 10_000
        b.kernel("ampere_sgemm_128x64_nn", base + 100, 6_000)  # backward compute
        b.kernel(NCCL, base + 1_000, 3_000)  # fully under the GEMM: overlapped
        b.kernel(NCCL, base + 7_000, 2_000)  # after compute: exposed
    (finding,) = comm_overlap(write(b, tmp_path, "synthetic_partial_overlap"))
    assert finding.evidence["collective_ms_per_step"] == 5.0
    assert finding.evidence["exposed_collective_ms_per_step"] == 2.0
