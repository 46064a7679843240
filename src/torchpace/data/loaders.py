"""fast_loader: a plain DataLoader with settings that keep the accelerator fed; autotune_workers.

Worker counts come from torchpace's one worker policy (torchpace.fixes.workers), the doctor's. On
a CPU-only machine that policy gives workers only to loading that waits (storage, network): so
fast_loader reads a few items in a throwaway worker process (the main process never opens the
dataset's files) and times how much of each item computed, as the doctor's loader sensor does.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from torch.utils.data import DataLoader, Dataset, IterableDataset, default_collate

from torchpace.cores import thread_ready_s, usable_cores
from torchpace.data.collate import pad_collate
from torchpace.data.epochs import EpochAwareDataset, epoch_aware
from torchpace.fixes.workers import Host, default_workers, for_loading, waits
from torchpace.policy import threads
from torchpace.policy.devices import has_accelerator
from torchpace.trace.stats import median

# Each worker keeps this many batches in flight: enough to ride out a slow sample, small enough
# that pinned host memory stays bounded (prefetch_factor * num_workers batches).
DEFAULT_PREFETCH_FACTOR = 4
# The probe of a CPU-only run: this many items, read within about this long (the first is left out:
# it pays the worker's one-off costs).
PROBE_ITEMS = 6
PROBE_S = 1.0
# Items that take less than this neither wait nor compute enough to want a worker: no verdict.
CHEAP_ITEM_S = 2e-4


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
    local_ranks = threads.local_ranks() if local_ranks is None else local_ranks
    accelerator = has_accelerator() if accelerator is None else accelerator
    host = Host(cores, local_ranks, "cuda" if accelerator else "cpu")
    return default_workers(host)


def fast_loader(dataset: Dataset[Any], batch_size: int | None = 1, **kw: Any) -> DataLoader[Any]:
    """A DataLoader with fast defaults; any DataLoader keyword given overrides them.

    Defaults: num_workers from the worker policy (the cores per local rank, the device, and on
    a CPU-only machine whether a few probed items wait or compute), pin_memory only with an
    accelerator, persistent_workers and prefetch_factor=4 when there are workers. A map-style
    dataset is
    wrapped (`loader.dataset.dataset` is yours; attributes forward), and an iterable one that has
    `set_epoch` when there are workers, so that `torchpace.data.set_epoch` reaches the worker
    copies and a failing item names its index: one that raises, or one that is None where
    collating it would fail (the default collate_fn or pad_collate).
    """
    num_workers = kw.pop("num_workers", None)
    if num_workers is None:
        num_workers = _policy_workers(dataset)
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    kw.setdefault("pin_memory", has_accelerator())
    if num_workers > 0:
        kw.setdefault("persistent_workers", True)
        kw.setdefault("prefetch_factor", DEFAULT_PREFETCH_FACTOR)
    if "batch_sampler" in kw:  # DataLoader forbids batch_size together with batch_sampler
        batch_size = 1
    dataset = _wrap(dataset, num_workers, reject_none=_none_fails(kw, batch_size))
    return DataLoader(dataset, batch_size=batch_size, num_workers=num_workers, **kw)


def _policy_workers(dataset: Dataset[Any]) -> int:
    """The worker policy's count for this dataset on this machine (the doctor's)."""
    if has_accelerator():
        return default_num_workers()
    host = Host(usable_cores(), threads.local_ranks(), "cpu")
    if default_workers(host) >= for_loading(host, io_bound=True):
        return default_workers(host)  # nothing a probe could change
    share = loading_cpu_share(dataset)
    return for_loading(host, None if share is None else waits(share))


def _queued_s() -> float:
    """Seconds this thread has waited for a core (the doctor's loader sensor reads the same)."""
    return thread_ready_s() or 0.0


class _TimedItems(Dataset[tuple[float, float, float]]):
    """Each item read and dropped: (seconds it took, of them waiting for a core, computing)."""

    def __init__(self, dataset: Dataset[Any]) -> None:
        self.dataset = dataset

    def __getitem__(self, index: int) -> tuple[float, float, float]:
        q0 = _queued_s()
        t0, c0 = time.perf_counter(), time.thread_time()
        self.dataset[index]
        cpu, elapsed = time.thread_time() - c0, time.perf_counter() - t0
        return elapsed, _queued_s() - q0, cpu


def loading_cpu_share(dataset: Dataset[Any]) -> float | None:
    """The share of reading an item that computes (thread CPU time over wall time, the time it
    waited for a core left out), the median over a few items read in a worker process; None when
    it cannot be told (an iterable or empty dataset, an item that fails, items too cheap to
    matter)."""
    if isinstance(dataset, IterableDataset) or not hasattr(dataset, "__len__"):
        return None
    n = len(dataset)  # type: ignore[arg-type]
    if n < 2:
        return None
    picks = [round(i * (n - 1) / PROBE_ITEMS) for i in range(PROBE_ITEMS + 1)]
    loader = DataLoader(_TimedItems(dataset), batch_size=None, sampler=picks, num_workers=1)
    times: list[tuple[float, float, float]] = []
    iterator = iter(loader)
    try:
        for k, item in enumerate(iterator):
            if k == 0:  # it paid the worker's start, imports and first touches: not timed
                started = time.perf_counter()
                continue
            times.append(tuple(float(x) for x in item))  # type: ignore[arg-type]
            if time.perf_counter() - started > PROBE_S:
                break
    except Exception:  # the real loader will raise it where the script can see it
        return None
    finally:
        del iterator  # shuts the worker down now, not whenever the collector runs
    if not times or sum(t[0] for t in times) < CHEAP_ITEM_S * len(times):
        return None
    # Time spent waiting for a core is neither computing nor waiting on the data: a busy machine
    # must not pass for I/O. The median item: on a virtual machine the host can take the core
    # from under a thread (steal time, in neither count), and schedstat's count can run ahead of
    # an item (its wall is then at least its CPU time).
    return median(cpu / max(elapsed - queued, cpu, 1e-9) for elapsed, queued, cpu in times)


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
        top = Host(usable_cores(), threads.local_ranks()).share or 1  # this rank's cores
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
