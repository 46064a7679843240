"""Every benchmark script still runs: each one's --smoke mode (seconds, tiny sizes), as a user
would start it. Its numbers mean nothing and are not read; a moved import or a changed API breaks
this suite instead of the next person who benchmarks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("bench_*.py"))

pytestmark = pytest.mark.slow


def test_every_benchmark_is_found() -> None:
    assert len(SCRIPTS) >= 12 and (BENCHMARKS / "bench_doctor.py") in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_smoke_mode_runs(script: Path, tmp_path: Path) -> None:
    # A hang fails it, a slow machine does not: the bound is minutes for a run of seconds.
    done = subprocess.run(
        [sys.executable, str(script), "--smoke"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "a benchmark prints its figures"


def test_follow_benchmark_counts_the_watchs_bytecodes(tmp_path: Path) -> None:
    # --count is the load-blind measure of --follow's cost per step (docs/doctor.md): the plain
    # script runs none of torchpace's bytecodes, the followed one some (the figures are not read).
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_follow.py"), "--count"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {
        line.split("  ")[1].strip(): line.rsplit(" ", 1)[-1]
        for line in done.stdout.splitlines()
        if "per step, torchpace's" in line
    }
    assert rows["plain"] == "0", done.stdout
    assert int(rows["doctor --follow"]) > 0, done.stdout


def test_follow_benchmark_sets_the_hooks_against_inert_in_one_process(tmp_path: Path) -> None:
    # --in-process: blocks with the hooks on and inert alternate in one doctored process; each
    # doctor mode prints its line (the figures are not read).
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_follow.py"), "--in-process", "--smoke"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if "the hooks" in line]
    assert len(lines) == 1 and "doctor --follow" in lines[0], done.stdout
