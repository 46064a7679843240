"""Training in processes the script spawns (torch.multiprocessing.spawn): the doctor runs in each
of them (runner/spawned.py) and reports theirs, as for torchrun's ranks."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpace.checkup import doctor_diagnosis, run
from torchpace.runner.run import DoctorOptions, RunHooks, Target

SCRIPTS = Path(__file__).parent / "scripts"


def _doctor(tmp_path: Path, *args: str, **options: object) -> list:
    opts = DoctorOptions(out_dir=tmp_path / "out", **{"warmup": 2, "steps": 3, **options})  # type: ignore[arg-type]
    return run(Target(str(SCRIPTS / "spawned.py"), args), opts, 1, RunHooks())


@pytest.mark.distributed
def test_spawned_ranks_are_profiled_and_stop_together(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # Before: the parent waited in join() with no step of its own while its processes trained
    # to their end; the report then said only that the training ran elsewhere.
    results = run_and_check = _doctor(tmp_path, "--ranks", "2", "--iters", "400")
    assert [r.rank for r in results] == [0, 1]
    for r in results:
        assert (r.exit_code, r.stopped_early, r.steps_recorded) == (0, True, 3), r.error
        assert r.inspection.world_size == 2 and r.step_source == "optimizer"
        assert any("the script started with torch.multiprocessing at" in n for n in r.notes)
    assert "spawned training done" not in capfd.readouterr().out  # the parent stopped too
    diagnosis = doctor_diagnosis(run_and_check, DoctorOptions(out_dir=tmp_path / "out"))
    assert diagnosis is not None and sorted(v.info.rank for v in diagnosis.ranks) == [0, 1]


def test_verify_says_it_cannot_reach_spawned_processes(tmp_path: Path) -> None:
    # --verify switches its fixes on in the script's process, which only waits for them: it
    # would time the plain training under every fix (after running each arm to the end).
    from torchpace.checkup import SPAWNED_VERIFY, checkup
    from torchpace.verify import VerifyOptions

    results = _doctor(tmp_path, "--iters", "400")
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
    (r,) = _doctor(tmp_path, "--iters", "6", "--fail")
    assert r.exit_code == 1 and "process 0 failed after its loop" in r.error
    assert 0 < r.steps_recorded <= 3 and not r.stopped_early


def test_a_run_to_the_end_lets_the_spawned_process_finish(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (r,) = _doctor(tmp_path, "--iters", "12", full=True)
    assert (r.exit_code, r.stopped_early, r.steps_recorded) == (0, False, 3), r.error
    assert "spawned training done" in capfd.readouterr().out


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
    opts = DoctorOptions(out_dir=tmp_path / "out", warmup=2, steps=3)
    (r,) = run(Target(str(script), ("--iters", "400")), opts, 1, RunHooks())
    assert r.rank is None and r.stopped_early and r.steps_recorded == 3


def test_the_deadline_ends_the_spawned_processes_with_their_reports(tmp_path: Path) -> None:
    # The script's deadline stops the parent first (its processes start later): without ending
    # them, it reported before they had, and they trained on.
    (r,) = _doctor(tmp_path, "--iters", "400", "--sleep", "0.5", steps=40, max_seconds=8.0)
    assert r.rank == 0 and r.steps_recorded > 0 and (r.terminated or r.timed_out)


def test_a_script_that_joins_its_processes_itself_is_stopped_after_them(tmp_path: Path) -> None:
    # Lightning's ddp_spawn joins the context itself, then waits on a queue for rank 0's
    # results: the stopped process never puts them, and the script hung there for good.
    (r,) = _doctor(tmp_path, "--iters", "400", "--queue")
    assert (r.rank, r.exit_code, r.stopped_early, r.steps_recorded) == (0, 0, True, 3), r.error
