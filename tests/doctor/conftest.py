"""Fixtures for doctor tests: run a small script under the doctor in-process, leaving torch clean."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from torchpace.runner.run import DoctorOptions, RunResult, Target, run_target

SCRIPTS = Path(__file__).parent / "scripts"
DoctorRun = Callable[..., RunResult]


@pytest.fixture
def clean_torch() -> Iterator[None]:
    """Put back the global switches a smell script may flip (threads, anomaly detection)."""
    import torch

    threads = torch.get_num_threads()
    modules = set(sys.modules)
    yield
    torch.set_num_threads(threads)
    torch.autograd.set_detect_anomaly(False)
    torch.use_deterministic_algorithms(False)
    for name in set(sys.modules) - modules:
        if name == "_common":
            del sys.modules[name]  # the scripts' helper, imported from their folder


@pytest.fixture
def doctor_run(tmp_path: Path, clean_torch: None) -> DoctorRun:
    """Run tests/doctor/scripts/<name> under the doctor in-process (2 warm-up, 3 profiled steps)."""

    def run(name: str, *args: str, **options: object) -> RunResult:
        opts = {"warmup": 2, "steps": 3, "window_after_s": 0.0, **options}
        target = Target(str(SCRIPTS / name), args)
        return run_target(target, DoctorOptions(out_dir=tmp_path / "out", **opts))  # type: ignore[arg-type]

    return run
