"""A real 2-rank gloo run under torchrun: one trace per rank, then a cross-rank diagnosis."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpace.checkup import doctor_diagnosis, with_any_ranks_oom
from torchpace.runner.launch import run_distributed, torchrun_command
from torchpace.runner.run import DoctorOptions, RunResult, Target
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.memory import MemoryRecord, OomRecord
from torchpace.runner.sensors.memory_census import Census

SCRIPTS = Path(__file__).parent / "scripts"


def test_torchrun_command_passes_the_script_and_its_args_unchanged(tmp_path: Path) -> None:
    cmd = torchrun_command(Target("train.py", ("--lr", "1")), DoctorOptions(out_dir=tmp_path), 2)
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    assert cmd[-4:] == ["--", "train.py", "--lr", "1"]


@pytest.mark.distributed
def test_two_gloo_ranks_give_two_traces_and_a_cross_rank_diagnosis(tmp_path: Path) -> None:
    options = DoctorOptions(out_dir=tmp_path / "out", warmup=2, steps=4)
    outcomes = run_distributed(Target(str(SCRIPTS / "ddp_train.py")), options, 2)
    assert [o.rank for o in outcomes] == [0, 1]
    for o in outcomes:
        assert o.result.exit_code == 0, o.result.error
        assert o.result.steps_recorded == 4 and o.result.step_source == "optimizer"
        assert o.result.inspection.world_size == 2
    diagnosis = doctor_diagnosis([o.result for o in outcomes], options)
    assert diagnosis is not None
    assert sorted(v.info.rank for v in diagnosis.ranks) == [0, 1]
    assert len(diagnosis.trace_files) == 2
    assert diagnosis.slowest_rank in (0, 1)


@pytest.mark.distributed
def test_ranks_stop_at_one_step_when_one_rank_stepped_aside(tmp_path: Path) -> None:
    """Rank 1 runs its own profiler (its doctor steps aside), rank 0 finishes its window: stopped
    alone, rank 0 left rank 1 in all_gather, which died with 'Connection closed by peer'."""
    options = DoctorOptions(out_dir=tmp_path / "out", warmup=2, steps=3)
    outcomes = run_distributed(Target(str(SCRIPTS / "ddp_aside.py")), options, 2)
    assert [o.rank for o in outcomes] == [0, 1]
    for o in outcomes:
        assert o.result.exit_code == 0, o.result.error
    said = "the ranks stopped together at the step rank 0 asked for"
    assert any(said in n for n in outcomes[1].result.notes), outcomes[1].result.notes
    diagnosis = doctor_diagnosis([o.result for o in outcomes], options)
    assert diagnosis is not None and diagnosis.caveat == ""
    assert len(diagnosis.trace_files) == 1  # rank 1 wrote none: named, not compared
    assert any(n.startswith("rank 1 is not compared") for n in diagnosis.notes)


@pytest.mark.distributed
def test_an_oom_on_rank_1_is_explained_as_rank_1s(tmp_path: Path) -> None:
    """Rank 1 runs out of host memory (RLIMIT_AS); rank 0 dies of the broken all-reduce, or is
    ended by torchrun's agent before it reports (seen on a loaded machine)."""
    options = DoctorOptions(out_dir=tmp_path / "out", warmup=2, steps=4)
    outcomes = run_distributed(Target(str(SCRIPTS / "oom_rank.py")), options, 2)
    assert outcomes[-1].rank == 1 and outcomes[-1].result.exit_code == 1
    for o in outcomes[:-1]:
        assert o.result.inspection.memory is None or o.result.inspection.memory.oom is None
    diagnosis = doctor_diagnosis([o.result for o in outcomes], options)
    assert diagnosis is not None
    (finding,) = [f for f in diagnosis.findings if f.rule == "out-of-memory"]
    assert finding.evidence["process"] == "rank 1" and finding.evidence["device"] == "host"
    assert finding.summary.startswith("The script ran out of host memory on rank 1 at ")
    assert finding.locations[0].line == 22


def _ran(rank: int, world: int, oom: OomRecord | None) -> RunResult:
    live = Inspection(world_size=world, memory=MemoryRecord(oom=oom) if oom else None)
    return RunResult((), 0, None, "", live, exit_code=1 if oom else 0, rank=rank)


def test_the_rank_that_ran_out_is_named_whoever_else_reported() -> None:
    oom = OomRecord("host", "MemoryError", None, None, (), Census("cpu", ()), None, None)
    both = with_any_ranks_oom([_ran(0, 2, None), _ran(1, 2, oom)]).memory
    alone = with_any_ranks_oom([_ran(1, 2, oom)]).memory  # rank 0 ended before it reported
    assert both is not None and both.oom is not None and both.oom.process == "rank 1"
    assert alone is not None and alone.oom is not None and alone.oom.process == "rank 1"
    single = with_any_ranks_oom([_ran(0, 1, oom)]).memory
    assert single is not None and single.oom is not None and single.oom.process == ""
