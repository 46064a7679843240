"""cpu-contention: torch's threads against the cores other processes left free (measured)."""

from __future__ import annotations

import pytest

from torchpace.doctor.finding import Severity
from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.cpu_contention import cpu_contention
from torchpace.doctor.severity import judge
from torchpace.policy.threads import FewerThreads
from torchpace.runner.sensors.host import DeviceRecord, HostRecord
from torchpace.runner.sensors.inspection import Inspection


def _busy(
    others: float,
    ready_ms: float,
    step_ms: float,
    threads: int = 2,
    fewer: FewerThreads | None = None,
) -> Inspection:
    host = HostRecord(
        cores=2,
        torch_threads=threads,
        others_cores=others,
        ready_ms_per_step=ready_ms,
        fewer_threads=fewer,
    )
    return Inspection(host=host, step_ms=step_ms)


def test_threads_fighting_the_machines_load_are_named() -> None:
    # pytorch-ignite's MNIST example under the doctor beside two busy loops (and other tenants):
    # other processes kept 1.82 of 2 cores busy, the training thread waited 1,694 ms of each
    # 1,819 ms step for a core; the same script's quiet step was 24 ms.
    (f,) = cpu_contention(_busy(1.82, 1694.1, 1819.0))
    assert (
        f.severity is Severity.MEDIUM
        and "waited 1694.1 ms of each 1819.0 ms step (93%)" in f.summary
    )
    assert (
        f.rule == "cpu-contention"
        and f.evidence["free_cores"] == 1
        and "torch.set_num_threads(1)" in f.fix
    )
    assert "machine's load" in f.caveat


def test_a_quiet_machine_or_one_thread_is_not_contention() -> None:
    assert cpu_contention(_busy(0.1, 0.4, 24.1)) == []  # quiet: nothing waits for a core
    assert cpu_contention(_busy(1.0, 20.0, 340.0)) == []  # busy, but the thread rarely waited
    assert cpu_contention(_busy(1.82, 1694.1, 1819.0, threads=1)) == []  # one thread: no barrier
    # 2 processes the script spawned, 2 threads each, on a quiet machine: the threads outnumber
    # the cores by themselves, which is cpu-threads' finding, not the machine's load.
    own = Inspection(host=_busy(0.0, 13.6, 35.5).host, step_ms=35.5, world_size=2)
    assert cpu_contention(own) == []


def test_verify_measures_the_threads_the_load_leaves() -> None:
    from torchpace.verify.appliers.threads import THREADS

    (f,) = cpu_contention(_busy(1.0, 170.0, 340.0))
    (fix,) = THREADS.plan(f, None)  # type: ignore[arg-type]
    assert fix.params == {"threads": 1}


def test_unmeasured_load_or_an_accelerator_is_not_judged() -> None:
    with pytest.raises(NotApplicable):
        cpu_contention(Inspection(host=HostRecord(cores=2, torch_threads=2), step_ms=24.0))
    busy = _busy(1.82, 1694.1, 1819.0)
    with pytest.raises(NotApplicable):
        cpu_contention(Inspection(device=DeviceRecord(kind="cuda"), host=busy.host, step_ms=9.0))


def test_steps_timed_at_fewer_threads_measure_the_saving() -> None:
    # pytorch/examples' VAE beside two busy loops under the doctor: profiled steps of 474 ms,
    # the thread waiting 237 ms of each for a core; after the window 3 unprofiled steps at
    # torch.set_num_threads(1) took 35.1 ms against 78.0 ms at 2.
    (f,) = cpu_contention(_busy(1.0, 237.0, 474.0, fewer=FewerThreads(2, 1, 78.0, 35.1, 3)))
    assert "3 steps at torch.set_num_threads(1) took 35.1 ms against 78.0 ms at 2" in f.summary
    assert f.saving_ms == pytest.approx(474.0 * (1 - 35.1 / 78.0))
    assert f.saving_method.startswith("measured:")
    assert f.evidence["fewer_threads_step_ms"] == 35.1 and f.evidence["unprofiled_step_ms"] == 78.0
    assert "fewer_threads_loading_x" not in f.evidence  # their batches were not timed
    timed = FewerThreads(2, 1, 78.0, 35.1, 3, loading=0.72)
    (t,) = cpu_contention(_busy(1.0, 237.0, 474.0, fewer=timed))
    assert t.evidence["fewer_threads_loading_x"] == 0.72
    assert "their batches took 72% of the profiled steps' wait" in t.summary
    assert judge(f, 474.0, live=True).severity is Severity.HIGH  # a busy run's cap comes later
    # Unmeasured, no saving is claimed.
    assert cpu_contention(_busy(1.0, 237.0, 474.0))[0].saving_ms is None


def test_fewer_threads_no_faster_save_nothing_and_say_so() -> None:
    # pytorch/examples' MNIST, a second run beside two busy loops: the thread waited half its
    # step for a core, but the steps at one thread took 238 ms against 235 at two. The
    # contention stands (it did not flip with the run); its measured saving is none: LOW.
    slow = FewerThreads(2, 1, 235.0, 238.0, 3)
    (f,) = cpu_contention(_busy(1.0, 250.0, 502.0, fewer=slow))
    assert f.saving_ms == 0.0 and "took 238.0 ms against 235.0 ms at 2" in f.summary
    assert judge(f, 502.0, live=True).severity is Severity.LOW
    # Its fix is no longer the one measured no faster.
    assert "set_num_threads(1) measured no faster" in f.fix and "quiet" in f.fix


def test_ranks_of_one_thread_are_told_to_take_fewer_ranks_not_threads() -> None:
    # pytorch/examples' imagenet resnet18 under torchrun (2 ranks, torchrun's 1 thread each)
    # beside two busy loops: 0.63 of 2 cores busy, 577.5 ms of each 1,681.8 ms step waiting for
    # a core. One thread a rank is already the fewest: fewer threads cannot be the fix.
    host = HostRecord(cores=2, torch_threads=1, others_cores=0.63, ready_ms_per_step=577.5)
    (f,) = cpu_contention(Inspection(host=host, step_ms=1681.8, world_size=2))
    assert "the ranks taking turns" in f.summary and "slowest thread" not in f.summary
    assert "already runs 1 torch thread" in f.fix and "--nproc-per-node 1" in f.fix
    assert "OMP_NUM_THREADS" not in f.fix and "--verify" not in f.caveat
    from torchpace.verify.appliers.threads import THREADS

    assert THREADS.plan(f, None) == []  # type: ignore[arg-type]  # the count it already has


def test_eager_steps_of_a_compiled_run_measure_no_saving() -> None:
    # Eager at one thread against compiled at two: the ratio is not what one thread saves.
    eager = FewerThreads(2, 1, 2425.0, 60.0, 3, eager=True)
    (f,) = cpu_contention(_busy(1.0, 1200.0, 2425.0, fewer=eager))
    assert f.saving_ms is None and not f.saving_method
    assert "torch.set_num_threads(1)" in f.fix and "measured no faster" not in f.fix
