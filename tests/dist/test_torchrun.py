"""torchpace.dist and TrainStep under a real 2-rank gloo DDP run launched with torchrun."""

from __future__ import annotations

import json

import pytest


@pytest.mark.distributed
@pytest.mark.slow
def test_ddp_helpers_and_accumulation(torchrun, tmp_path):
    proc = torchrun("ddp_check.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))

    # init: gloo on CPU, world of 2, only rank 0 is main; shutdown leaves no process group.
    assert (r0["world_size"], r0["backend"], r0["device"]) == (2, "gloo", "cpu")
    assert (r0["is_main"], r1["is_main"]) == (True, False)
    assert not r0["initialized_after_shutdown"] and not r1["initialized_after_shutdown"]

    # loader: disjoint halves covering all 10 indices, a new order each epoch.
    for epoch in ("epoch0", "epoch1"):
        assert sorted(r0["loader"][epoch] + r1["loader"][epoch]) == list(range(10))
    assert r0["loader"]["epoch0"] != r0["loader"]["epoch1"]
    assert r0["loader"]["batches"] == 3  # 5 samples per rank, batch 2

    # wrap: DDP with gradient_as_bucket_view and without find_unused_parameters.
    for r in (r0, r1):
        acc = r["accumulation"]
        assert (acc["is_ddp"], acc["bucket_view"], acc["find_unused"]) == (True, True, False)
        # no_sync: no all-reduce on the first 3 micro-batches, the buckets once on the last.
        assert acc["calls_per_micro"][:3] == [0, 0, 0] and acc["calls_per_micro"][3] >= 1
        assert acc["stepped"] == [False, False, False, True]
        # 2 ranks x 4 micro-batches of 1 == one process with a batch of 8.
        assert acc["max_param_diff"] < 1e-5

    # find_batch_size: rank 1 fits only 20, rank 0 fits 40; both must answer 20.
    assert r0["batch_size"] == r1["batch_size"] == 20


@pytest.mark.distributed
def test_a_ranks_load_reading_counts_its_sibling_ranks_as_the_job(torchrun, tmp_path):
    # Counted as "other processes", a sibling rank made every 2-rank run on 2 cores read busy.
    proc = torchrun("job_load.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0 = json.loads((tmp_path / "job_load.json").read_text())
    assert r0["root_is_parent"]
    assert r0["own_s"] < 0.3  # rank 0 slept: what its reading counted is rank 1's burn
    assert r0["job_s"] >= 0.5
