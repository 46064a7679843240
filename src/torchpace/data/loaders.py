"""fast_loader: a plain DataLoader with settings that keep the accelerator fed; autotune_workers."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, default_collate

from torchpace.cores import usable_cores
from torchpace.data.collate import pad_collate
from torchpace.data.epochs import EpochAwareDataset, epoch_aware
from torchpace.fixes.workers import Host, default_workers

__all__ = ["autotune_workers", "default_num_workers", "fast_loader", "measure_workers"]

# Each worker keeps this many batches in flight: enough to ride out a slow sample, small enough
# that pinned host memory stays bounded (prefetch_factor * num_workers batches).
DEFAULT_PREFETCH_FACTOR = 4


def _local_world_size() -> int:
    # torchrun sets LOCAL_WORLD_SIZE: the ranks on this machine share its cores.
    return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def _accelerator_available() -> bool:
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        return bool(accelerator.is_available())
    return bool(torch.cuda.is_available())


def default_num_workers(
    cores: int | None = None, local_ranks: int | None = None, accelerator: bool | None = None
) -> int:
    """Workers per rank from torchpace's one worker policy (torchpace.fixes.workers).

    With an accelerator: one per core of this rank's share, at most 8, none below 2 cores (the
    training process mostly waits on the device; on 2 cores, 2 workers beat 1 with CPU-bound
    decoding and were 1.6x faster with 2 ms of read latency, benchmarks/bench_data_loader.py).
    On a CPU-only machine: half the share, none below 4 cores, because the math already uses every
    core and a worker that decodes takes its core (one worker made a cheap-sample CPU step 54%
    slower on 2 cores). Loading that waits on I/O wants more: measure with `autotune_workers`.
    """
    cores = usable_cores() if cores is None else cores
    local_ranks = _local_world_size() if local_ranks is None else local_ranks
    accelerator = _accelerator_available() if accelerator is None else accelerator
    host = Host(cores, local_ranks, "cuda" if accelerator else "cpu")
    return default_workers(host)


def fast_loader(dataset: Dataset[Any], batch_size: int | None = 1, **kw: Any) -> DataLoader[Any]:
    """A DataLoader with fast defaults; any DataLoader keyword given overrides them.

    Defaults: num_workers from the cores per local rank, pin_memory only with an accelerator,
    persistent_workers and prefetch_factor=4 when there are workers. A map-style dataset is
    wrapped (`loader.dataset.dataset` is yours; attributes forward), and an iterable one that has
    `set_epoch` when there are workers, so that `torchpace.data.set_epoch` reaches the worker
    copies and a failing item names its index: one that raises, or one that is None where
    collating it would fail (the default collate_fn or pad_collate).
    """
    num_workers = kw.pop("num_workers", None)
    if num_workers is None:
        num_workers = default_num_workers()
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    kw.setdefault("pin_memory", _accelerator_available())
    if num_workers > 0:
        kw.setdefault("persistent_workers", True)
        kw.setdefault("prefetch_factor", DEFAULT_PREFETCH_FACTOR)
    if "batch_sampler" in kw:  # DataLoader forbids batch_size together with batch_sampler
        batch_size = 1
    dataset = _wrap(dataset, num_workers, reject_none=_none_fails(kw, batch_size))
    return DataLoader(dataset, batch_size=batch_size, num_workers=num_workers, **kw)


def _wrap(dataset: Dataset[Any], num_workers: int, *, reject_none: bool) -> Dataset[Any]:
    """Map-style: always (errors name their index); iterable: with workers, if it has set_epoch."""
    if getattr(dataset, "epoch_shared_with_workers", False):
        return dataset
    if isinstance(dataset, IterableDataset):
        return epoch_aware(dataset) if num_workers > 0 else dataset
    return EpochAwareDataset(dataset, reject_none=reject_none)


def _none_fails(kw: dict[str, Any], batch_size: int | None) -> bool:
    """Whether a None item would fail in collate: torch's default_collate and pad_collate refuse
    it (a collate_fn of the user's own may drop it; without batching it passes through)."""
    if batch_size is None and "batch_sampler" not in kw:
        return False
    collate = kw.get("collate_fn")
    return collate is None or getattr(collate, "func", collate) in (default_collate, pad_collate)


def _rate(loader: DataLoader[Any], batches: int, warmup: int) -> float:
    iterator = iter(loader)
    try:
        for _ in range(warmup):  # worker start-up and first-batch latency are not throughput
            if next(iterator, None) is None:
                return 0.0
        start, done = time.perf_counter(), 0
        for _ in range(batches):
            if next(iterator, None) is None:
                break
            done += 1
        elapsed = time.perf_counter() - start
    finally:
        del iterator  # shuts the workers down before the next candidate starts
    return done / elapsed if done and elapsed > 0 else 0.0


def measure_workers(
    dataset: Dataset[Any],
    batch_size: int | None = 1,
    candidates: Iterable[int] | None = None,
    *,
    batches: int = 50,
    warmup: int = 5,
    **loader_kw: Any,
) -> dict[int, float]:
    """Batches per second for each candidate worker count (fresh, non-persistent loaders)."""
    if candidates is None:
        top = Host(usable_cores(), _local_world_size()).share or 1  # this rank's cores
        candidates = sorted({0, 1, 2, *range(4, top + 1, 2), top})
    rates: dict[int, float] = {}
    for workers in candidates:
        if workers < 0:
            raise ValueError(f"candidate worker counts must be >= 0, got {workers}")
        kw = dict(loader_kw, num_workers=workers, persistent_workers=False)
        if workers == 0:
            kw.pop("prefetch_factor", None)
        loader = DataLoader(dataset, batch_size=batch_size, **kw)
        rates[workers] = _rate(loader, batches, warmup)
    return rates


def pick_plateau(rates: dict[int, float], tolerance: float = 0.05) -> int:
    """The smallest worker count within `tolerance` of the best measured rate."""
    if not rates:
        raise ValueError("pick_plateau needs at least one measured worker count")
    best = max(rates.values())
    return min(w for w, rate in rates.items() if rate >= (1 - tolerance) * best)


def autotune_workers(
    dataset: Dataset[Any],
    batch_size: int | None = 1,
    candidates: Sequence[int] | None = None,
    *,
    batches: int = 50,
    tolerance: float = 0.05,
    **loader_kw: Any,
) -> int:
    """Measure batches/s per worker count; return the smallest count on the plateau.

    "On the plateau" means within `tolerance` (5%) of the fastest candidate: more workers past
    that point only cost memory and start-up time. Extra keywords go to each DataLoader.
    """
    rates = measure_workers(dataset, batch_size, candidates, batches=batches, **loader_kw)
    return pick_plateau(rates, tolerance)
