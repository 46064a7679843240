"""The one-call GPU check (benchmarks/gpu/): its plan is runnable as written, its driver time-boxes
and isolates steps, and a CPU rehearsal of some steps leaves the archive and summary behind.

The device call is a single shot on a scarce machine; these tests are what stops a typo there.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from torchpace.cli.main import build_parser
from torchpace.doctor.registry import all_rules

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "benchmarks" / "gpu"


@pytest.fixture
def gpu_modules(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ModuleType]]:
    """check.py, check_plan.py, calibrate.py and the pairs, imported as their scripts import them."""
    monkeypatch.syspath_prepend(str(GPU / "pairs"))
    monkeypatch.syspath_prepend(str(GPU))
    names = ("check", "check_plan", "calibrate", "_pair")
    yield {name: importlib.import_module(name) for name in names}
    for name in names:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("rehearse", [False, True], ids=["gpu", "rehearsal"])
def test_every_planned_command_parses_and_names_files_that_exist(
    gpu_modules: dict[str, ModuleType], tmp_path: Path, rehearse: bool
) -> None:
    plan = gpu_modules["check_plan"]
    steps = plan.plan(plan.Mode(sys.executable, tmp_path, rehearse))
    assert len({s.name for s in steps}) == len(steps)
    assert {f"pair-{p.replace('_', '-')}" for p in plan.PAIRS} <= {s.name for s in steps}
    for step in steps:
        for cmd in step.commands:
            argv = list(cmd.argv)
            if cmd.budget_margin_s is not None:  # the driver adds the step's time left
                argv += ["--budget", "100"]
            if argv[:3] == [sys.executable, "-m", "torchpace"]:
                args = build_parser().parse_args(argv[3:])  # SystemExit(2) on a typo
                if args.command == "doctor":
                    assert (ROOT / args.script).is_file(), args.script
            elif argv[0] == sys.executable and argv[1].endswith(".py"):
                assert (ROOT / argv[1]).is_file(), argv[1]


def test_the_gpu_plan_runs_on_cuda_and_the_rehearsal_on_the_cpu(
    gpu_modules: dict[str, ModuleType], tmp_path: Path
) -> None:
    plan = gpu_modules["check_plan"]

    def devices(rehearse: bool) -> dict[str, str]:
        steps = plan.plan(plan.Mode(sys.executable, tmp_path, rehearse))
        return {
            s.name: c.argv[c.argv.index("--device") + 1]
            for s in steps
            for c in s.commands
            if "--device" in c.argv
        }

    gpu, cpu = devices(rehearse=False), devices(rehearse=True)
    assert set(gpu.values()) == {"cuda"} and set(cpu.values()) == {"cpu"}
    assert {"bench-vision", "bench-text", "bench-vision-short", "pair-tf32"} <= gpu.keys()
    first = plan.plan(plan.Mode(sys.executable, tmp_path, False))[0]
    assert first.name == "cuda-visible"  # the one step whose failure ends the GPU run


def test_the_short_bench_leaves_out_only_compile(gpu_modules: dict[str, ModuleType]) -> None:
    from torchpace.bench.techniques import ORDER

    names = [t.name for t in ORDER]
    assert list(gpu_modules["check_plan"].WITHOUT_COMPILE) == [n for n in names if n != "compile"]


def test_pair_scripts_take_the_rehearsal_arguments(gpu_modules: dict[str, ModuleType]) -> None:
    for name in gpu_modules["check_plan"].PAIRS:
        pair = importlib.import_module(name).PAIR
        args = gpu_modules["_pair"]._parse(
            pair, ["--out", "x", "--device", "cpu", "--size", "tiny"]
        )
        assert (args.device, args.size) == ("cpu", "tiny")
        assert pair.rule in {spec.name for spec in all_rules()}
        sys.modules.pop(name, None)


def _args(check: ModuleType, tmp_path: Path, budget: float) -> object:
    return check._parse(["--rehearse", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"),
                         "--budget", str(budget)])  # fmt: skip


def test_a_failing_or_hanging_step_does_not_stop_the_next(
    gpu_modules: dict[str, ModuleType], tmp_path: Path
) -> None:
    check, plan = gpu_modules["check"], gpu_modules["check_plan"]

    def step(name: str, code: str, timeout_s: float = 60) -> object:
        cmd = plan.Command((sys.executable, "-c", code))
        return plan.Step(name, 27, timeout_s, (cmd,), lambda work: name)

    steps = [
        step("fails", "raise SystemExit(3)"),
        step("hangs", "import time; time.sleep(600)", timeout_s=0.1),  # x10 slack: 1 s
        step("passes", "print('fine')"),
    ]
    outcomes = check.execute(steps, _args(check, tmp_path, budget=600), t0=time.time())
    assert [o.status for o in outcomes] == ["failed rc=3", "timeout 1s", "ok"]
    assert outcomes[2].figure == "passes"
    assert "fine" in (tmp_path / "work" / "logs" / "passes.log").read_text()


def test_steps_that_no_longer_fit_the_budget_are_skipped_and_said_so(
    gpu_modules: dict[str, ModuleType], tmp_path: Path
) -> None:
    check, plan = gpu_modules["check"], gpu_modules["check_plan"]
    cmd = plan.Command((sys.executable, "-c", "pass"))
    steps = [plan.Step("late", 28, 60, (cmd,), lambda work: "")]
    args = _args(check, tmp_path, budget=check.PACK_RESERVE_S + check.MIN_STEP_S - 1)
    (outcome,) = check.execute(steps, args, t0=time.time())
    assert outcome.status == "skipped: no time"
    text = check._write(args.work, args.out, [outcome], args, time.time())
    assert "--steps late" in text


def test_calibrate_left_over_is_run_here_not_on_the_device(
    gpu_modules: dict[str, ModuleType], tmp_path: Path
) -> None:
    # The H200 call skipped calibrate for time after its pairs had finished; the rerun command
    # named it alone, and in a new call it would find no pairs. It reads files, not a GPU.
    check = gpu_modules["check"]
    args = _args(check, tmp_path, budget=600)
    outcomes = [check.Outcome("pair-tf32", 28, "ok"), check.Outcome("calibrate", 28, "skipped: no time"),
                check.Outcome("bench-text", 28, "skipped: no time")]  # fmt: skip
    notes = check._notes(outcomes, args, [])
    assert notes[-1].endswith("--steps bench-text --budget SECONDS")
    assert "calibrate.py <extracted archive>/gpu-check/pairs" in notes[0]
    outcomes[0].status = "skipped: no time"  # the pairs go again: calibrate goes with them
    assert check._notes(outcomes, args, [])[-1].endswith(
        "--steps pair-tf32,calibrate,bench-text --budget SECONDS"
    )


def test_the_archive_leaves_out_scratch_and_then_the_largest_files(
    gpu_modules: dict[str, ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = gpu_modules["check"]
    work, out = tmp_path / "work", tmp_path / "out"
    for name, size in (
        ("traces/big.json.gz", 3000),
        ("traces/small.json.gz", 1000),
        ("scratch/x.gz", 1),
    ):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(b"x" * size)
    out.mkdir()
    monkeypatch.setattr(check, "MAX_ARCHIVE_BYTES", 2000)
    assert check.pack(work, out) == ["traces/big.json.gz (0 MiB)"]
    with tarfile.open(out / "gpu-check.tar.gz") as tar:
        assert tar.getnames() == ["gpu-check/traces/small.json.gz"]


def test_unknown_step_is_a_one_line_error(gpu_modules: dict[str, ModuleType]) -> None:
    with pytest.raises(
        SystemExit, match="unknown step 'pytest-cud'; steps: cuda-visible, pytest-cuda"
    ):
        gpu_modules["check"].main(["--dry-run", "--steps", "pytest-cud"])


@pytest.mark.parametrize(
    ("estimate", "kind", "measured", "interval", "verdict"),
    [
        (2.2, "estimate", 2.0, [1.8, 2.2], "within +-25% (+10%)"),
        (3.0, "estimate", 2.0, [1.8, 2.2], "outside +-25% (+50%)"),
        (2.5, "upper bound", 2.0, [1.8, 2.2], "bound holds"),
        (1.0, "upper bound", 2.0, [1.8, 2.2], "bound broken"),
        (None, "none", 2.0, [1.8, 2.2], "no estimate stated"),
    ],
)
def test_calibration_verdicts(
    gpu_modules: dict[str, ModuleType],
    estimate: float | None,
    kind: str,
    measured: float,
    interval: list[float],
    verdict: str,
) -> None:
    assert gpu_modules["calibrate"].judge(estimate, kind, measured, interval) == verdict


@pytest.mark.slow
def test_rehearsal_leaves_the_archive_and_summary(tmp_path: Path) -> None:
    """A few real steps, CPU-sized, through check.sh as the device runs it."""
    steps = "cuda-visible,env,pair-item-sync,calibrate"
    out, work = tmp_path / "out", tmp_path / "work"
    env = {**os.environ, "PY": sys.executable}
    done = subprocess.run(
        ["bash", str(GPU / "check.sh"), "--rehearse", "--steps", steps, "--work", str(work), "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [(s["name"], s["status"]) for s in summary["steps"]] == [
        (name, "ok") for name in steps.split(",")
    ]
    assert done.stdout.rstrip().splitlines()[-1].startswith("calibrate ")  # the table is last
    with tarfile.open(out / "gpu-check.tar.gz") as tar:
        names = set(tar.getnames())
    expected = [
        "summary.txt",
        "reports/env.json",
        "logs/pair-item-sync.log",
        "pairs/calibration.md",
    ]
    expected += [
        f"pairs/item_sync/{f}"
        for f in ("before.json.gz", "after.json.gz", "pair.json", "before-report.json")
    ]
    assert {f"gpu-check/{name}" for name in expected} <= names
