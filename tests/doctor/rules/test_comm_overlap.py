"""comm-overlap: collective time that no compute overlaps."""

from __future__ import annotations

from pathlib import Path

from gpu_traces import gpu_builder, ranks, recorded, write

from torchpace.doctor.rules.comm_overlap import comm_overlap

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"


def test_fires_on_recorded_straggler_wait_and_names_the_bound() -> None:
    rank0, rank1 = ranks("straggler_seqlen")
    (finding,) = comm_overlap(rank0)
    assert float(finding.evidence["overlapped_fraction"]) < 0.1
    assert float(finding.evidence["exposed_step_fraction"]) > 0.5
    assert "bucket_cap_mb" in finding.fix and "upper bound" in finding.saving_method
    assert comm_overlap(rank1) == []  # the straggler itself barely waits


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
