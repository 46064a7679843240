"""The doctor's report of a multi-rank run withholds cross-rank findings that measured the
machine's load (checkup.doctor_diagnosis, doctor/conditions.py), on recorded gloo ranks."""

from __future__ import annotations

from pathlib import Path

from torchpace.checkup import doctor_diagnosis
from torchpace.runner.conditions import RunConditions
from torchpace.runner.options import DoctorOptions
from torchpace.runner.run import RunResult
from torchpace.runner.sensors.inspection import Inspection

# Rank 1 loads its data slowly: it is the straggler, rank 0 waits for it in the all-reduce.
STRAGGLER = Path(__file__).parents[1] / "fixtures" / "traces" / "ddp_gloo_2rank" / "straggler_data"


def _results(ready_ms: dict[int, float]) -> list[RunResult]:
    return [
        RunResult(
            trace_files=(str(STRAGGLER / f"rank{rank}.pt.trace.json.gz"),),
            steps_recorded=6,
            step_source="window",
            step_note="",
            inspection=Inspection(),
            exit_code=0,
            # Four cores for the two ranks: each has its own, so only the run-queue wait decides
            # (ranks filling their cores: test_passes.py, ddp_tutorial_2rank_shared).
            conditions=RunConditions(usable_cores=4, ready_ms_per_step=ready),
            rank=rank,
        )
        for rank, ready in ready_ms.items()
    ]


def _rules(ready_ms: dict[int, float]) -> tuple[set[str], set[str]]:
    diagnosis = doctor_diagnosis(_results(ready_ms), DoctorOptions(out_dir=STRAGGLER, steps=6))
    assert diagnosis is not None
    return {f.rule for f in diagnosis.findings}, {s.rule for s in diagnosis.skipped}


def test_a_straggler_and_its_peers_wait_are_kept_when_no_load_explains_them() -> None:
    found, _ = _rules({0: 0.5, 1: 0.6})
    assert "rank-imbalance" in found and found & {"comm-bound", "comm-overlap"}


def test_a_straggler_held_back_by_load_and_the_wait_for_it_are_withheld() -> None:
    # Rank 1 waited ~60 ms per step for a core: its 37 ms of extra work, and rank 0's exposed
    # collective time spent waiting for it, are the machine's load.
    found, skipped = _rules({0: 0.5, 1: 60.0})
    assert not found & {"rank-imbalance", "comm-bound", "comm-overlap"}
    assert "rank-imbalance" in skipped and skipped & {"comm-bound", "comm-overlap"}
