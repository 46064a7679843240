"""independent-ranks on recorded multi-rank runs: ranks that train apart, and ones that do not."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_traces import ranks

from torchpace.doctor.facts import ranks_of
from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.independent_ranks import independent_ranks
from torchpace.doctor.rules.rank_imbalance import rank_imbalance
from torchpace.trace import load_traces

HF = Path(__file__).parents[2] / "fixtures" / "traces" / "independent_ranks" / "hf_run_clm_cpu"


def test_hf_trainer_under_torchrun_without_use_cpu_trains_one_copy_per_rank() -> None:
    traces = load_traces(HF)
    (finding,) = independent_ranks(ranks_of(traces))
    assert finding.evidence["ranks_count"] == 2 and finding.evidence["collectives_per_step"] == 0
    assert "DistributedDataParallel" in finding.fix and "use_cpu=True" in finding.fix
    # Lightning's examples/fabric/image_classifier under torchrun: a bare Fabric() on CPU.
    assert 'Fabric(strategy="ddp", devices=N)' in finding.fix
    assert finding.saving_ms is None
    # The step time of rank 0 against rank 1 is no straggler: nobody waits (it said so, HIGH).
    with pytest.raises(NotApplicable, match="no rank ran a collective"):
        rank_imbalance(ranks_of(traces))


def test_ranks_that_average_their_parameters_every_few_steps_communicate() -> None:
    """accelerate's local_sgd.py: 41 all-reduces in one of 4 profiled steps, none in the median
    step, read as ranks that never communicate (MEDIUM)."""
    local_sgd = load_traces(HF.parent / "accelerate_local_sgd")
    assert independent_ranks(ranks_of(local_sgd)) == []


@pytest.mark.parametrize("run", ["balanced", "straggler_seqlen", "straggler_data"])
def test_silent_on_ddp_runs(run: str) -> None:
    assert independent_ranks(ranks_of(ranks(run))) == []
