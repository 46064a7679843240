"""cpu-threads: threads x ranks against cores."""

from __future__ import annotations

import pytest

from torchpace.doctor.registry import NotApplicable
from torchpace.doctor.rules.cpu_threads import cpu_threads
from torchpace.runner.sensors.host import DeviceRecord, HostRecord
from torchpace.runner.sensors.inspection import Inspection


def test_ranks_each_using_every_core_oversubscribe() -> None:
    (f,) = cpu_threads(
        Inspection(host=HostRecord(cores=16, torch_threads=16, allocator="glibc"), world_size=2)
    )
    assert "32 threads on 16 cores" in f.summary and "OMP_NUM_THREADS=8" in f.fix
    assert "jemalloc" in f.fix


def test_one_thread_on_many_cores_leaves_them_idle() -> None:
    (f,) = cpu_threads(Inspection(host=HostRecord(cores=16, torch_threads=1)))
    assert "torch.set_num_threads(16)" in f.fix


def test_matching_threads_and_gpu_runs() -> None:
    assert cpu_threads(Inspection(host=HostRecord(cores=8, torch_threads=8))) == []
    with pytest.raises(NotApplicable):
        cpu_threads(
            Inspection(device=DeviceRecord(kind="cuda"), host=HostRecord(cores=8, torch_threads=8))
        )


def test_the_doctors_own_torchrun_launch_does_not_trip_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # A container (or taskset) lets the process run on 4 of the machine's 16 cores: the launch
    # once gave each of 2 ranks 16 // 2 = 8 threads, 16 threads on 4 cores, which this rule
    # then reported as the script's own oversubscription.
    from torchpace.runner.launch import rank_env

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    threads = int(rank_env(2)["OMP_NUM_THREADS"])
    live = Inspection(host=HostRecord(cores=4, torch_threads=threads), world_size=2)
    assert threads == 2 and cpu_threads(live) == []


def test_the_launch_keeps_the_users_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchpace.runner.launch import rank_env

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert rank_env(2)["OMP_NUM_THREADS"] == "3"
