"""loader-config: advice that fits the cores, the ranks, the device and the dataset."""

from __future__ import annotations

from dataclasses import replace

from torchpace.doctor.live import Inspection, LoaderFacts
from torchpace.doctor.rules.loader_config import loader_config

LOADER = LoaderFacts(
    num_workers=0,
    batch_size=32,
    pin_memory=False,
    persistent_workers=False,
    prefetch_factor=None,
    iterable=False,
    wait_fraction=0.4,
)
CPU8 = Inspection(device_kind="cpu", cpu_cores=8, loaders=(LOADER,), step_ms=50.0)


def test_workers_suggested_from_cores_per_rank_with_a_saving() -> None:
    (f,) = loader_config(CPU8)
    assert "num_workers=7" in f.fix and f.saving_ms == 20.0
    (f,) = loader_config(replace(CPU8, world_size=4))
    assert "num_workers=1" in f.fix


def test_one_core_per_rank_gets_no_worker_advice() -> None:
    (f,) = loader_config(replace(CPU8, world_size=8))
    assert "num_workers" not in f.fix and "only 1 core" in f.summary


def test_more_workers_than_cores_is_flagged() -> None:
    many = replace(LOADER, num_workers=12, persistent_workers=True, prefetch_factor=2)
    (f,) = loader_config(replace(CPU8, loaders=(many,)))
    assert "num_workers=12 but only 8 core(s)" in f.summary and "num_workers=7" in f.fix


def test_live_buffer_is_never_told_to_add_workers() -> None:
    rl = replace(LOADER, iterable=True, live_source=True, shards_by_worker=False)
    assert loader_config(replace(CPU8, loaders=(rl,))) == []
    (f,) = loader_config(
        replace(CPU8, loaders=(replace(rl, num_workers=2, persistent_workers=True),))
    )
    assert "stale copy" in f.summary and "num_workers=0" in f.fix


def test_pinning_depends_on_an_accelerator() -> None:
    quiet = replace(LOADER, wait_fraction=0.0)
    (f,) = loader_config(replace(CPU8, device_kind="cuda", loaders=(quiet,)))
    assert "pin_memory=True" in f.fix
    (f,) = loader_config(
        replace(CPU8, accelerator_count=0, loaders=(replace(quiet, pin_memory=True),))
    )
    assert "no accelerator" in f.summary


def test_fast_loading_with_no_workers_is_fine() -> None:
    assert loader_config(replace(CPU8, loaders=(replace(LOADER, wait_fraction=0.01),))) == []


def test_waiting_with_few_workers_asks_for_more_and_with_all_cores_for_cheaper_items() -> None:
    few = replace(LOADER, num_workers=2, persistent_workers=True, prefetch_factor=2)
    (f,) = loader_config(replace(CPU8, loaders=(few,)))
    assert "only 2 worker(s) while 8 cores" in f.summary and "num_workers=7" in f.fix
    busy = replace(few, num_workers=7)
    (f,) = loader_config(replace(CPU8, loaders=(busy,)))
    assert "already use the 8 cores" in f.summary and "num_workers" not in f.fix
    assert "More workers than cores" in f.caveat
