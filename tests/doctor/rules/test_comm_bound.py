"""comm-bound: collectives take a large share of the step."""

from __future__ import annotations

import pytest
from gpu_traces import ranks, recorded

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.comm_bound import comm_bound


def test_fires_on_recorded_gloo_rank_of_300() -> None:
    (finding,) = comm_bound(recorded("cpu_only/gloo_rank34_of300"))
    assert float(finding.evidence["collective_step_fraction"]) > 0.8
    assert finding.evidence["measured_from"] == "host ranges"
    assert finding.evidence["collectives_per_step"] == {"gloo:all_reduce": 2.0}
    assert "no_sync" in finding.fix and "bf16_compress_hook" in finding.fix


def test_fast_rank_waiting_for_a_straggler_fires_with_the_caveat() -> None:
    rank0, _ = ranks("straggler_seqlen")
    (finding,) = comm_bound(rank0)
    assert "rank-imbalance" in finding.caveat


def test_silent_on_recorded_nccl_a100_and_token_budget_ranks() -> None:
    assert comm_bound(recorded("nccl/nccl_a100")) == []  # 12 ms of a 222 ms step
    assert [comm_bound(t) for t in ranks("token_budget")] == [[], []]


def test_single_process_without_collectives_finds_nothing() -> None:
    assert comm_bound(recorded("loader_workers/resnet50_v100_num_workers_0")) == []


def test_multi_rank_trace_without_collectives_is_not_applicable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpu_traces import gpu_builder, write

    b = gpu_builder()
    b.top["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 8}
    b.kernel("ampere_sgemm_128x64_nn", 200, 100)
    with pytest.raises(NotApplicable, match="rank 0 of 8 shows no collective"):
        comm_bound(write(b, tmp_path, "synthetic_ddp_without_comm"))


def test_one_small_bucket_gets_fewer_calls_not_fewer_bytes() -> None:
    """1 MB a step in one all-reduce costs its latency: bf16 compression (half of 84 bytes on a
    toy DDP model in the sweep) saves nothing; no_sync over micro-batches halves the calls."""
    rank0, _ = ranks("straggler_seqlen")
    (finding,) = comm_bound(rank0)
    assert finding.evidence["collective_bytes_per_step"] == 1_044_008
    assert "no_sync" in finding.fix and "bf16_compress_hook" not in finding.fix
    assert "cost their latency, not their bytes" in finding.saving_method
