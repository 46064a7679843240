"""Fixtures for doctor tests: run a small script under the doctor in-process, leaving torch clean."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from torch_state import torch_left_clean

from torchpace.runner.run import DoctorOptions, RunResult, Target, run_target

SCRIPTS = Path(__file__).parent / "scripts"
DoctorRun = Callable[..., RunResult]


@pytest.fixture
def clean_torch() -> Iterator[None]:
    """Leave torch's global switches as they were (torch_left_clean), and drop the scripts'
    helper module."""
    modules = set(sys.modules)
    with torch_left_clean():
        yield
    for name in set(sys.modules) - modules:
        if name == "_common":
            del sys.modules[name]  # the scripts' helper, imported from their folder


@pytest.fixture
def doctor_run(tmp_path: Path, clean_torch: None) -> DoctorRun:
    """Run tests/doctor/scripts/<name> under the doctor in-process (2 warm-up, 3 profiled steps,
    no steps at fewer threads: those run only while other processes hold the cores, and a test's
    count of the steps after the window followed the machine's load: 9 for 6 under make test
    beside two busy loops)."""

    def run(name: str, *args: str, **options: object) -> RunResult:
        opts = {"warmup": 2, "steps": 3, "window_after_s": 0.0, "probe_steps": 0, **options}
        target = Target(str(SCRIPTS / name), args)
        return run_target(target, DoctorOptions(out_dir=tmp_path / "out", **opts))  # type: ignore[arg-type]

    return run
