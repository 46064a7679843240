"""data-parallel: severity follows the device count."""

from __future__ import annotations

from torchpace.doctor.finding import Severity
from torchpace.doctor.rules.data_parallel import data_parallel
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.model import ModelRecord


def test_many_gpus_high_one_device_low_none_silent() -> None:
    (f,) = data_parallel(Inspection(model=ModelRecord(data_parallel_devices=4, steps=1)))
    assert f.severity is Severity.HIGH and "DistributedDataParallel" in f.fix
    (f,) = data_parallel(Inspection(model=ModelRecord(data_parallel_devices=0, steps=1)))
    assert f.severity is Severity.LOW
    assert data_parallel(Inspection(model=ModelRecord(steps=1))) == []


def test_the_summary_says_what_the_wrapper_has_to_work_with() -> None:
    (none,) = data_parallel(Inspection(model=ModelRecord(data_parallel_devices=0, steps=1)))
    assert "no GPU" in none.summary and "device(s)" not in none.summary
    (one,) = data_parallel(Inspection(model=ModelRecord(data_parallel_devices=1, steps=1)))
    assert "over 1 device" in one.summary
