"""Training in processes the script spawns (torch.multiprocessing.spawn): the doctor runs in each
of them (runner/spawned.py) and reports theirs, as for torchrun's ranks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from torchpace.checkup import doctor_diagnosis
from torchpace.runner.launch import encode_options
from torchpace.runner.run import DoctorOptions, RunResult, Target

SCRIPTS = Path(__file__).parent / "scripts"

# The doctor runs in a process of its own: multiprocessing's resource tracker, which a spawn
# starts, would stay a child of the test's worker (tests/trace/test_parallel.py counts them).
_RUN = """
import sys
from pathlib import Path
import msgspec
from torchpace.checkup import run
from torchpace.runner.launch import decode_options
from torchpace.runner.run import RunHooks, Target
results = run(Target(sys.argv[3], tuple(sys.argv[4:])), decode_options(sys.argv[1]), 1, RunHooks())
Path(sys.argv[2]).write_bytes(msgspec.json.encode(results))
"""


def _doctor(
    tmp_path: Path, *args: str, script: Path = SCRIPTS / "spawned.py", **options: object
) -> tuple[list[RunResult], str]:
    """The doctor's results on the script, and what it printed."""
    opts = DoctorOptions(out_dir=tmp_path / "out", **{"warmup": 2, "steps": 3, **options})  # type: ignore[arg-type]
    out = tmp_path / "results.json"
    cmd = [sys.executable, "-c", _RUN, encode_options(opts), str(out), str(script), *args]
    ran = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    assert out.exists(), ran.stderr[-3000:]
    return msgspec.json.decode(out.read_bytes(), type=list[RunResult]), ran.stdout


@pytest.mark.distributed
def test_spawned_ranks_are_profiled_and_stop_together(tmp_path: Path) -> None:
    # Before: the parent waited in join() with no step of its own while its processes trained
    # to their end; the report then said only that the training ran elsewhere.
    results, printed = _doctor(tmp_path, "--ranks", "2", "--iters", "400")
    assert [r.rank for r in results] == [0, 1]
    for r in results:
        assert (r.exit_code, r.stopped_early, r.steps_recorded) == (0, True, 3), r.error
        assert r.inspection.world_size == 2 and r.step_source == "optimizer"
        assert any("the script started with torch.multiprocessing at" in n for n in r.notes)
    assert "spawned training done" not in printed  # the parent stopped too
    diagnosis = doctor_diagnosis(results, DoctorOptions(out_dir=tmp_path / "out"))
    assert diagnosis is not None and sorted(v.info.rank for v in diagnosis.ranks) == [0, 1]


def test_verify_says_it_cannot_reach_spawned_processes(tmp_path: Path) -> None:
    # --verify switches its fixes on in the script's process, which only waits for them: it
    # would time the plain training under every fix (after running each arm to the end).
    from torchpace.checkup import SPAWNED_VERIFY, checkup
    from torchpace.verify import VerifyOptions

    results, _ = _doctor(tmp_path, "--iters", "400")
    options, target = DoctorOptions(out_dir=tmp_path / "out"), Target("spawned.py")
    assert all(r.spawned for r in results)
    plain = checkup(results, options, target)
    assert plain is not None and not any("--verify" in n for n in plain.notes)
    measured = checkup(results, options, target, verify=VerifyOptions())
    assert measured is not None and SPAWNED_VERIFY in measured.notes


def test_a_spawned_process_that_fails_fails_the_script_as_without_the_doctor(
    tmp_path: Path,
) -> None:
    # Its loop ends before the doctor would stop it (6 steps): the process runs to its end and raises, torch
    # sends the error to the parent, whose mp.spawn raises it: exit 1, as under plain python.
    (r,), _ = _doctor(tmp_path, "--iters", "6", "--fail")
    assert r.exit_code == 1 and "process 0 failed after its loop" in r.error
    assert 0 < r.steps_recorded <= 3 and not r.stopped_early


def test_a_run_to_the_end_lets_the_spawned_process_finish(tmp_path: Path) -> None:
    (r,), printed = _doctor(tmp_path, "--iters", "12", full=True)
    assert (r.exit_code, r.stopped_early, r.steps_recorded) == (0, False, 3), r.error
    assert "spawned training done" in printed


def test_a_followed_spawned_run_says_whose_run_its_account_is(tmp_path: Path) -> None:
    # The account runs from the spawned process's start, not the script's.
    (r,), printed = _doctor(tmp_path, "--iters", "40", follow=True)
    assert "spawned training done" in printed and r.inspection.whole_run is not None
    account = r.inspection.whole_run.account
    assert account.ended == "in process 0 of 1 the script spawned: the script ran to its end"


def test_processes_that_do_not_train_leave_the_report_to_the_script(tmp_path: Path) -> None:
    # The script spawns a process that prepares data, then trains in its own process.
    script = tmp_path / "prepares.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(SCRIPTS)!r})\n"
        "import torch, torch.multiprocessing as mp\n"
        "from _common import images, mlp, take\n"
        "from torch.utils.data import DataLoader\n"
        "def prepare(i):\n"
        "    torch.randn(64, 64).sum()\n"
        "if __name__ == '__main__':\n"
        "    mp.spawn(prepare, nprocs=1)\n"
        "    model = mlp()\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "    for x, y in take(DataLoader(images(4096), batch_size=8)):\n"
        "        torch.nn.functional.cross_entropy(model(x), y).backward()\n"
        "        opt.step()\n"
        "        opt.zero_grad()\n"
    )
    (r,), _ = _doctor(tmp_path, "--iters", "400", script=script)
    assert r.rank is None and r.stopped_early and r.steps_recorded == 3


def test_the_deadline_ends_the_spawned_processes_with_their_reports(tmp_path: Path) -> None:
    # The script's deadline stops the parent first (its processes start later): without ending
    # them, it reported before they had, and they trained on.
    (r,), _ = _doctor(tmp_path, "--iters", "400", "--sleep", "0.5", steps=40, max_seconds=8.0)
    assert r.rank == 0 and r.steps_recorded > 0 and (r.terminated or r.timed_out)


def test_a_script_that_joins_its_processes_itself_is_stopped_after_them(tmp_path: Path) -> None:
    # Lightning's ddp_spawn joins the context itself, then waits on a queue for rank 0's
    # results: the stopped process never puts them, and the script hung there for good.
    (r,), _ = _doctor(tmp_path, "--iters", "400", "--queue")
    assert (r.rank, r.exit_code, r.stopped_early, r.steps_recorded) == (0, 0, True, 3), r.error


HOGWILD = SCRIPTS / "hogwild.py"


def test_hogwild_trainers_are_profiled_and_not_compared(tmp_path: Path) -> None:
    # Before: the parent's test pass was profiled and the report said the training ran in 2
    # processes the doctor did not profile (pytorch/examples' mnist_hogwild).
    results, printed = _doctor(tmp_path, "--iters", "400", script=HOGWILD)
    assert [r.rank for r in results] == [0, 1]
    for r in results:
        assert (r.exit_code, r.stopped_early, r.steps_recorded) == (0, True, 3), r.error
        assert r.spawned and r.step_source == "optimizer" and "Hogwild" in r.apart
        said = [n for n in r.notes if "the script started with multiprocessing at" in n]
        assert len(said) == 1 and "hogwild.py:" in said[0] and "of 2" in said[0], r.notes
    assert len({t for r in results for t in r.trace_files}) == 2  # one trace each
    assert "hogwild test done" not in printed  # stopped at the join, as after mp.spawn
    assert not (tmp_path / "out" / "processes.started").exists()
    diagnosis = doctor_diagnosis(results, DoctorOptions(out_dir=tmp_path / "out"))
    assert diagnosis is not None and len(diagnosis.ranks) == 2
    apart = {s.rule: s.reason for s in diagnosis.skipped if "Hogwild" in s.reason}
    assert set(apart) == {"independent-ranks", "rank-imbalance"}
    assert not any(f.rule in apart for f in diagnosis.findings)


def test_hogwild_run_to_the_end_keeps_the_trainers_traces(tmp_path: Path) -> None:
    # The parent's own test pass runs after them: its trace must not take rank 0's name.
    results, printed = _doctor(tmp_path, "--iters", "30", script=HOGWILD, full=True)
    assert "trainer 0 done" in printed and "hogwild test done" in printed
    assert [r.rank for r in results] == [0, 1] and all(r.steps_recorded for r in results)
    names = [Path(t).name.rsplit("_", 1)[1] for r in results for t in r.trace_files]
    assert names == ["rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"]
    written = (tmp_path / "out").glob("*.pt.trace.json.gz")
    assert sorted(p.name.rsplit("_", 1)[1] for p in written) == ["main.pt.trace.json.gz", *names]


def test_a_helper_process_is_left_alone(tmp_path: Path) -> None:
    # No shared model among its arguments: the training is the parent's, the helper runs as
    # under plain python, to its end.
    results, printed = _doctor(tmp_path, "--iters", "400", "--helper", script=HOGWILD)
    assert len(results) == 1 and not results[0].spawned and results[0].steps_recorded == 3
    assert "helper done" in printed


@pytest.mark.cuda
def test_hogwild_trainers_on_a_gpu(tmp_path: Path) -> None:
    # CUDA tensors pass between processes through CUDA IPC: each trainer steps the parent's model
    # on the GPU and records its kernels.
    results, _ = _doctor(tmp_path, "--iters", "400", "--cuda", script=HOGWILD)
    assert [r.rank for r in results] == [0, 1]
    for r in results:
        assert (r.exit_code, r.stopped_early, r.steps_recorded) == (0, True, 3), r.error
        assert "Hogwild" in r.apart
    diagnosis = doctor_diagnosis(results, DoctorOptions(out_dir=tmp_path / "out"))
    assert diagnosis is not None
    assert [v.info.device_kind for v in diagnosis.ranks] == ["cuda", "cuda"]
    assert {"independent-ranks", "rank-imbalance"} <= {s.rule for s in diagnosis.skipped}
