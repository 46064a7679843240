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
