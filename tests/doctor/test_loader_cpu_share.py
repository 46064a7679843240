"""The doctor tells loading that waits from loading that computes, and the stall advice follows."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator

import pytest

from torchpace.cores import thread_ready_s
from torchpace.doctor.diagnose import diagnose
from torchpace.runner.run import RunResult
from torchpace.trace import load_trace

DoctorRun = Callable[..., RunResult]


def _stall(result: RunResult):  # type: ignore[no-untyped-def]
    assert result.exit_code == 0, result.error
    trace = load_trace(result.trace_files[0])
    found = [
        f for f in diagnose(trace, live=result.inspection).findings if f.rule == "dataloader-stall"
    ]
    (finding,) = found
    return finding


def test_waiting_loader_is_seen_as_waiting_and_gets_workers(doctor_run: DoctorRun) -> None:
    result = doctor_run("loader_waits.py")
    (loader,) = result.inspection.loaders
    assert loader.wait_cpu_fraction is not None and loader.wait_cpu_fraction < 0.5
    f = _stall(result)
    assert f.evidence["workers_pay"] == "likely" and "num_workers=" in f.fix
    assert "cuda" not in f.fix.lower()


def test_computing_loader_is_not_promised_a_worker_saving_on_few_cores(
    doctor_run: DoctorRun,
) -> None:
    result = doctor_run("loader_computes.py")
    f = _stall(result)
    assert f.evidence["wait_cpu_fraction"] > 0.5  # relative to the thread's share when computing
    assert f.evidence["workers_pay"] in ("unlikely", "uncertain")
    if (result.inspection.host.cores or 0) <= 2:
        assert f.evidence["workers_pay"] == "unlikely" and f.saving_ms is None


@pytest.fixture(params=["quiet", "busy"])
def machine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The run as it is, or beside two busy loops (what many users' machines have)."""
    if request.param == "quiet":
        yield "quiet"
        return
    if thread_ready_s() is None:
        pytest.skip("no /proc/thread-self/schedstat: the load-proof share cannot be read here")
    loops = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        yield "busy"
    finally:
        for p in loops:
            p.kill()
            p.wait()


@pytest.mark.parametrize(
    ("script", "computes"), [("loader_waits.py", False), ("loader_computes.py", True)]
)
def test_waiting_or_computing_is_the_same_verdict_beside_busy_loops(
    doctor_run: DoctorRun, machine: str, script: str, computes: bool
) -> None:
    """A busy machine stretches computing (run-queue time), which the thread CPU share read as
    waiting: the same PPO script got "add workers" in one run, "unlikely to help" in the next."""
    result = doctor_run(script)
    (loader,) = result.inspection.loaders
    if loader.wait_compute_share is not None:
        assert (loader.wait_compute_share > 0.5) is computes, loader
    f = _stall(result)
    assert (f.evidence["workers_pay"] == "likely") is not computes, f.evidence
