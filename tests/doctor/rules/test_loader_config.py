"""loader-config: configuration that fits the cores, the ranks and the device; never a stall."""

from __future__ import annotations

from dataclasses import replace

from torchpace.doctor.rules.loader_config import loader_config
from torchpace.runner.sensors.host import DeviceRecord, HostRecord
from torchpace.runner.sensors.inspection import Inspection
from torchpace.runner.sensors.loader import LoaderFacts
from torchpace.trace.stacks import SourceLocation

LOADER = LoaderFacts(
    num_workers=0,
    batch_size=32,
    pin_memory=False,
    persistent_workers=False,
    prefetch_factor=None,
    iterable=False,
    wait_fraction=0.4,
    epochs_started=1,
)
CPU8 = Inspection(
    device=DeviceRecord(kind="cpu"), host=HostRecord(cores=8), loaders=(LOADER,), step_ms=50.0
)


def test_a_stalled_loader_is_left_to_dataloader_stall() -> None:
    # One finding per cause: the wait is dataloader-stall's, with its one number and one fix.
    assert loader_config(CPU8) == []
    few = replace(LOADER, num_workers=2, persistent_workers=True, prefetch_factor=2)
    assert loader_config(replace(CPU8, loaders=(few,))) == []


def test_more_workers_than_cores_is_flagged_with_the_policy_count() -> None:
    many = replace(LOADER, num_workers=12, persistent_workers=True, prefetch_factor=2)
    (f,) = loader_config(replace(CPU8, loaders=(many,)))
    assert "num_workers=12 but only 8 core(s)" in f.summary
    assert "num_workers=4" in f.fix  # a CPU run keeps half the cores for the math
    assert "--verify" in f.caveat
    pinned = replace(many, pin_memory=True)
    (g,) = loader_config(replace(CPU8, device=DeviceRecord(kind="cuda"), loaders=(pinned,)))
    assert "num_workers=8" in g.fix and g.caveat == ""
    (h,) = loader_config(replace(CPU8, world_size=4, loaders=(replace(many, num_workers=4),)))
    assert "only 2 core(s) for each of 4 ranks" in h.summary and "num_workers=1" in h.fix


def test_live_buffer_is_never_told_to_add_workers() -> None:
    rl = replace(LOADER, iterable=True, live_source=True, shards_by_worker=False)
    assert loader_config(replace(CPU8, loaders=(rl,))) == []
    (f,) = loader_config(
        replace(CPU8, loaders=(replace(rl, num_workers=2, persistent_workers=True),))
    )
    assert "stale copy" in f.summary and "num_workers=0" in f.fix


def test_pinning_depends_on_an_accelerator_and_cpu_fixes_name_no_cuda() -> None:
    quiet = replace(LOADER, wait_fraction=0.0)
    (f,) = loader_config(replace(CPU8, device=DeviceRecord(kind="cuda"), loaders=(quiet,)))
    assert "pin_memory=True" in f.fix
    # Without an accelerator torch pins nothing whatever pin_memory says (the sensor records
    # what the iterator does): no finding, no fix naming cuda.
    pinned = replace(quiet, pin_memory=True)
    assert (
        loader_config(replace(CPU8, device=replace(CPU8.device, count=0), loaders=(pinned,))) == []
    )


def test_workers_restarted_each_epoch() -> None:
    restart = replace(LOADER, num_workers=2, prefetch_factor=2, epochs_started=3)
    (f,) = loader_config(replace(CPU8, loaders=(restart,)))
    assert "persistent_workers=True" in f.fix and f.severity.label == "medium"
    # Long epochs: a restart of a second or a few is a small share of each (DCGAN's 140 s).
    long = replace(restart, batches_per_epoch=16)
    (f,) = loader_config(replace(CPU8, loaders=(long,), step_ms=8_800.0))
    assert f.severity.label == "low" and "Each epoch is long" in f.caveat


def test_restarts_in_one_endless_epoch_are_not_worth_a_finding() -> None:
    # minGPT's trainer: 4 workers, a RandomSampler of 1e10 samples, one epoch that never ends.
    endless = replace(
        LOADER, num_workers=2, prefetch_factor=2, epochs_started=1, batches_per_epoch=156_250_000
    )
    assert loader_config(replace(CPU8, loaders=(endless,))) == []
    short = replace(endless, batches_per_epoch=100)  # 100 x 50 ms: a restart every 5 s
    (f,) = loader_config(replace(CPU8, loaders=(short,)))
    assert f.severity.label == "low" and "(100 batches, about 5 s)" in f.caveat
    unknown = replace(endless, batches_per_epoch=None)  # no length: kept, with its caveat
    (g,) = loader_config(replace(CPU8, loaders=(unknown,)))
    assert "Only one epoch was seen;" in g.caveat


def test_one_cause_on_two_loaders_is_one_finding_naming_both() -> None:
    """imagenet's train and val loaders (4 workers on 2 cores each) gave the same finding twice."""
    at = [SourceLocation("main.py", 269), SourceLocation("main.py", 273)]
    two = tuple(
        replace(LOADER, num_workers=4, persistent_workers=True, prefetch_factor=2, created_at=a)
        for a in at
    )
    (f,) = loader_config(replace(CPU8, host=HostRecord(cores=2), loaders=two))
    assert f.summary.endswith("(2 DataLoaders at main.py:269, main.py:273)")
    assert f.locations == tuple(at)


def test_a_loader_never_iterated_gets_no_finding() -> None:
    """Its workers never started (imagenet's val loader in a run stopped during training)."""
    idle = replace(LOADER, num_workers=4, epochs_started=0)
    assert loader_config(replace(CPU8, host=HostRecord(cores=2), loaders=(idle,))) == []
