"""dataloader-stall on recorded traces: flagged when loading dominates, silent once fixed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from torchpace.doctor.finding import Severity
from torchpace.doctor.rules.dataloader_stall import dataloader_stall
from torchpace.doctor.severity import judge
from torchpace.runner.sensors.host import DeviceRecord, HostRecord
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.loader import LoaderFacts
from torchpace.trace import Trace, load_trace
from torchpace.trace.synthetic import TraceBuilder

Load = Callable[[str], Trace]
RESNET = "loader_workers/resnet50_v100_num_workers_0"


def test_flags_the_v100_resnet_trace(trace_fixture: Load) -> None:
    trace = trace_fixture(RESNET)
    (f,) = dataloader_stall(trace)
    # The policy's severity: the saving is more than a tenth of the step.
    assert judge(f, trace.median_step_ms()).severity is Severity.HIGH
    assert 0.3 < f.evidence["wait_fraction"] < 0.5  # type: ignore[operator]
    assert 60 < f.evidence["wait_ms"] < 80  # type: ignore[operator]
    assert f.evidence["loader_iterator_name"] == "_SingleProcessDataLoaderIter"
    # 70 ms per batch behind 106 ms of the rest of the step: one worker keeps up, one spare.
    assert f.evidence["suggested_workers_count"] == 2 and f.evidence["workers_pay"] == "likely"
    assert "num_workers=2" in f.fix and "pin_memory=True" in f.fix
    assert "persistent_workers=True" in f.fix and "DevicePrefetcher" in f.fix


def test_saving_is_below_the_naive_dataloader_share(trace_fixture: Load) -> None:
    trace = trace_fixture(RESNET)
    (f,) = dataloader_stall(trace)
    naive = f.evidence["wait_ms"]
    assert f.saving_ms is not None
    # Workers cannot make the step shorter than the rest of it plus what the main process keeps.
    assert 0.5 * naive < f.saving_ms < naive  # type: ignore[operator]
    assert f.saving_ms <= trace.median_step_ms() - f.evidence["rest_of_step_ms"]  # type: ignore[operator]
    assert "workers" in f.saving_method and "GPU busy" in f.saving_method


def test_saving_is_bounded_by_gpu_time(trace_fixture: Load) -> None:
    (f,) = dataloader_stall(trace_fixture(RESNET), residual_fraction=0.0)
    step = f.evidence["step_ms"]
    assert step - f.saving_ms >= f.evidence["gpu_busy_ms"] - 1e-6  # type: ignore[operator]


def test_flags_the_cpu_sleepy_dataset(trace_fixture: Load) -> None:
    (f,) = dataloader_stall(trace_fixture("loader_workers/cpu_sleepy_loader"))
    assert f.evidence["wait_fraction"] > 0.5  # type: ignore[operator]
    assert f.evidence["gpu_busy_ms"] is None
    (g,) = dataloader_stall(trace_fixture("loader_workers/mlp_sleepy_dataset_torch2.13"))
    assert 0.2 < g.evidence["wait_fraction"] < 0.5  # type: ignore[operator]


def test_silent_with_a_fast_loader(trace_fixture: Load) -> None:
    assert dataloader_stall(trace_fixture("healthy/cpu_fast_loader")) == []


def test_threshold_is_configurable(trace_fixture: Load) -> None:
    assert dataloader_stall(trace_fixture(RESNET), min_wait_fraction=0.6) == []


def _loader(**changes: object) -> LoaderFacts:
    base = LoaderFacts(num_workers=0, batch_size=32, pin_memory=False, persistent_workers=False,
                       prefetch_factor=None, iterable=False, wait_fraction=0.4)  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(("cores", "ranks", "workers", "pays"),
                         [(16, 1, 2, "likely"), (2, 1, 2, "likely"), (1, 1, 1, "uncertain"),
                          (16, 16, 1, "uncertain")])  # fmt: skip
def test_live_cores_and_ranks_fit_the_suggestion(
    trace_fixture: Load, cores: int, ranks: int, workers: int, pays: str
) -> None:
    live = Inspection(
        device=DeviceRecord(kind="cuda"),
        host=HostRecord(cores=cores),
        world_size=ranks,
        loaders=(_loader(),),
    )
    (f,) = dataloader_stall(trace_fixture(RESNET), live=live)
    assert f.evidence["suggested_workers_count"] == workers
    assert f.evidence["workers_pay"] == pays
    assert f"num_workers={workers}" in f.fix


def test_synthetic_workers_already_in_use(tmp_path: Path) -> None:
    b = TraceBuilder()
    for n in range(3):
        t0 = n * 10_000
        b.step(n, t0, 10_000)
        b.op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", t0, 6_000,
             cat="user_annotation")  # fmt: skip
        b.op("aten::mm", t0 + 6_000, 4_000)
    (f,) = dataloader_stall(load_trace(b.write(tmp_path / "synthetic_workers.json")))
    assert f.evidence["loader_iterator_name"] == "_MultiProcessingDataLoaderIter"
    # Worker count unknown without live facts: the model doubles it, halving the loader's period.
    assert f.evidence["current_workers_count"] is None
    assert f.evidence["suggested_workers_factor"] == 2
    assert "num_workers=2 * N" in f.fix
    assert f.saving_ms == pytest.approx(10.0 - max(4.0 + 0.6, 5.0))
    assert "from the workers" in f.summary


def test_saving_matches_the_measured_after_fix_run(trace_fixture: Load) -> None:
    """The sleepy CPU loop re-recorded with 4 workers: the estimate predicts its step time."""
    before = trace_fixture("loader_workers/cpu_sleepy_loader")
    after = trace_fixture("loader_workers/cpu_sleepy_loader_4_workers")
    (f,) = dataloader_stall(before)
    assert f.saving_ms is not None and f.evidence["suggested_workers_count"] == 4
    predicted = before.median_step_ms() - f.saving_ms
    measured = after.median_step_ms()
    naive = before.median_step_ms() - f.evidence["wait_ms"]  # type: ignore[operator]
    assert abs(predicted - measured) / measured < 0.35
    assert abs(predicted - measured) < abs(naive - measured)  # better than "the whole wait"


def test_v100_pair_saving_is_an_upper_bound_of_the_measured_step(trace_fixture: Load) -> None:
    """Kineto's V100 ResNet-50 samples, num_workers 0 then 4: the model says up to 62.9 ms; the
    step measured 50.0 ms shorter (medians; 36.5 against the after run's mean), its DataLoader
    phase 68.5 ms shorter: the rest of the step slowed by 17% (the workers took cores). More than
    25% above the step's change, so the figure is called what it is: an upper bound."""
    before = trace_fixture(RESNET)
    after = trace_fixture("loader_workers/resnet50_v100_num_workers_4")
    (f,) = dataloader_stall(before)
    measured = before.median_step_ms() - after.median_step_ms()
    assert f.saving_ms is not None and 45 < measured <= f.saving_ms < 1.3 * measured
    assert "; up to 62.9 ms per step can be saved" in f.summary
    assert f.saving_method.startswith("upper bound:")
    assert "assumed to keep its pace" in f.saving_method


SLEEPY = "loader_workers/cpu_sleepy_loader"


def _cpu(cores: int, cpu_fraction: float | None) -> Inspection:
    loader = _loader(wait_cpu_fraction=cpu_fraction, dataset_type="SleepyDataset")
    return Inspection(
        device=DeviceRecord(kind="cpu"),
        host=HostRecord(cores=cores, cpu_bf16="none"),
        loaders=(loader,),
    )


def test_cpu_loading_that_waits_gets_workers_without_device_code(trace_fixture: Load) -> None:
    (f,) = dataloader_stall(trace_fixture(SLEEPY), live=_cpu(2, 0.05))
    assert f.evidence["workers_pay"] == "likely" and f.saving_ms and f.saving_ms > 0
    assert f.evidence["suggested_workers_count"] == 4  # waiting workers need no core: 2 x 2
    assert "num_workers=4" in f.fix
    assert "cuda" not in f.fix.lower() and "pin_memory" not in f.fix
    assert "non_blocking" not in f.fix


def test_cpu_loading_that_computes_on_two_cores_gets_no_worker_prescription(
    trace_fixture: Load,
) -> None:
    (f,) = dataloader_stall(trace_fixture(SLEEPY), live=_cpu(2, 0.95))
    assert f.evidence["workers_pay"] == "unlikely" and f.saving_ms is None
    assert "num_workers" not in f.fix and "cheaper" in f.fix
    assert "unlikely to help" in f.summary and "takes its core from the math" in f.summary
    assert "--verify" in f.caveat
    assert f.saving_method.startswith("not estimated")


def test_cpu_loading_of_unknown_kind_is_uncertain_and_says_so(trace_fixture: Load) -> None:
    (f,) = dataloader_stall(trace_fixture(SLEEPY), live=_cpu(8, None))
    assert f.evidence["workers_pay"] == "uncertain"
    assert f.fix.startswith("# only if loading waits on I/O")
    assert "if the loading waits on I/O" in f.summary and "--verify" in f.caveat
    (g,) = dataloader_stall(trace_fixture(SLEEPY))  # the trace alone: a CPU run of unknown size
    assert g.evidence["workers_pay"] == "uncertain" and "cuda" not in g.fix.lower()


def test_workers_that_already_use_the_cores_get_cheaper_loading(trace_fixture: Load) -> None:
    live = Inspection(
        device=DeviceRecord(kind="cuda"),
        host=HostRecord(cores=4),
        loaders=(_loader(num_workers=4),),
    )
    (f,) = dataloader_stall(trace_fixture(RESNET), live=live)
    assert f.evidence["workers_pay"] == "unlikely" and f.saving_ms is None
    assert "4 workers already use what 4 core(s) allow" in f.summary
    assert "augmentation to the GPU" in f.fix


def test_a_busy_machine_does_not_make_computing_look_like_waiting(trace_fixture: Load) -> None:
    # Another job leaves the thread 30% of a core: inside __next__ and between batches alike.
    busy = _loader(wait_cpu_fraction=0.3, rest_cpu_fraction=0.32)
    live = Inspection(device=DeviceRecord(kind="cpu"), host=HostRecord(cores=2), loaders=(busy,))
    (f,) = dataloader_stall(trace_fixture(SLEEPY), live=live)
    assert f.evidence["workers_pay"] == "unlikely" and f.evidence["wait_cpu_fraction"] > 0.8
