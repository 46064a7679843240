"""The DataLoader sensor: configuration, epochs, time spent waiting, IterableDataset sharding,
the padding in its batches (sensors/padding.py) and what its samples cost (sensors/samples.py).

`LoaderFacts` is its record (plain data, read by the loader rules); `LoaderRecord` counts one
loader while the script runs; `LoaderSensor` patches DataLoader construction and iteration."""

from __future__ import annotations

import collections
import contextlib
import queue
import time
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from torchpace.cores import thread_ready_s
from torchpace.runner.patching import Patcher, user_location
from torchpace.runner.sensors import padding, samples
from torchpace.runner.sensors.padding import PaddedBatch
from torchpace.runner.sensors.samples import SampleProbe
from torchpace.trace.stacks import SourceLocation

HASH_BATCHES = 32  # batches hashed per loader to spot repeats (multi-worker IterableDatasets only)
HASH_MAX_BYTES = 64 << 20  # skip hashing batches larger than this
_LIVE_TYPES: tuple[type, ...] = (collections.deque, queue.Queue)


@dataclass(frozen=True)
class LoaderFacts:
    """One DataLoader the script created, with where it was created."""

    num_workers: int
    batch_size: int | None
    pin_memory: bool
    persistent_workers: bool
    prefetch_factor: int | None
    iterable: bool  # the dataset is an IterableDataset
    shards_by_worker: bool | None = None  # an IterableDataset that reads get_worker_info()
    dataset_type: str = ""
    # A PyG dataset's `transform`, as repr() gives it (run at every read; "" for none or others)
    pyg_transform: str = ""
    # A PyG InMemoryDataset read without a transform: it keeps each graph it built (its
    # `_data_list`), and a later read copies it, nothing to decode again.
    pyg_in_memory: bool = False
    created_at: SourceLocation | None = None
    worker_init_fn: bool = False  # a worker_init_fn may shard an IterableDataset by itself
    # An IterableDataset that reads a live buffer (a deque or queue: reinforcement learning), where
    # worker processes would each read a stale copy; None: not an IterableDataset.
    live_source: bool | None = None
    epochs_started: int = 0  # iterators created over the run (one per epoch)
    # Wall time from each iter(loader) to its first batch, in order, in any phase: what starting
    # an epoch costs (with workers: starting them, nothing prefetched yet). One per epoch whose
    # first batch came.
    first_batch_ms: tuple[float, ...] = ()
    # How much longer the first step after a restarted epoch's first batch took than the second
    # (the time between their batches), one per restart of a loader with workers: the workers
    # start (and the script's process, forked, copies the pages it writes) beside that step.
    first_step_extra_ms: tuple[float, ...] = ()
    # Share of the profiled steps' time spent inside this loader's __next__; None: not profiled.
    wait_fraction: float | None = None
    # Share of that wait the training thread spent on its CPU (thread CPU time / wall time):
    # low when the loading waits on I/O, near 1 when it computes; None: not measured.
    wait_cpu_fraction: float | None = None
    # Share of that wait that computes, as on an idle machine: CPU / (CPU + blocked), where
    # blocked = wall - CPU - run-queue time (Linux's schedstat). Other processes' load adds only
    # run-queue time (to computing, and after each wake-up from I/O), so this share is the same
    # on a quiet and a busy machine, where the CPU share alone drops and computing read as
    # waiting. None: unreadable.
    wait_compute_share: float | None = None
    # The same share between batches (the rest of the step): what the thread gets when it
    # computes, lower on a machine busy with other work. None: not measured.
    rest_cpu_fraction: float | None = None
    # Batches identical to an earlier batch among those the doctor hashed during the inspected steps.
    duplicate_batches: int | None = None
    # len(loader): batches in one epoch; None when it has no length (an IterableDataset).
    batches_per_epoch: int | None = None
    # Mean time inside __next__ per batch during the profiled steps; None: not profiled.
    wait_ms_per_batch: float | None = None
    # The training thread's CPU time inside __next__ over its CPU time per batch (inside and
    # between): a share that other processes' load does not change, unlike wait_fraction (wall
    # time, which a preemption inside a short wait inflates). None: under two profiled batches.
    wait_cpu_share: float | None = None
    # The profiled batches that showed their padding (variable-length sequences), in order.
    padded_batches: tuple[PaddedBatch, ...] = ()
    # Profiled batches a backward pass followed before the next batch came; None: not profiled.
    # 0 beside a loader with some: an evaluation loader (its batches fed no training step).
    trained_batches: int | None = None
    # Two reads of the same samples at the first warm-up batch (map-style datasets only).
    sample_probe: SampleProbe | None = None


# The session's phases whose steps carry none of the doctor's own work (no profiler, no window
# to end, no live objects watched): a restart's first steps are timed only within one of them.
UNTOUCHED = frozenset(("timed", "done"))


class FirstSteps:
    """A restarted epoch's first two steps, timed from each batch to the next one's request: the
    first step's work, then the second's (the first's own extra left out by the comparison)."""

    __slots__ = ("first", "got", "phase")

    def __init__(self, got: float, phase: str) -> None:
        self.got = got  # when the last batch came
        self.phase = phase  # the session's, then: both steps must run in it
        self.first: float | None = None  # the first step's time, once its next batch is asked


@dataclass
class LoaderRecord:
    """One DataLoader the script created, with what the doctor counted about it."""

    static: LoaderFacts  # the configuration, read when the loader was made (no reference kept)
    epochs: int = 0
    first_batch_s: list[float] = field(default_factory=list)  # iter() to its first batch
    first_step_extra_s: list[float] = field(default_factory=list)  # see LoaderFacts
    wait_s: float = 0.0  # time inside __next__ during the profiled steps
    wait_cpu_s: float = 0.0  # the training thread's CPU time inside __next__ meanwhile
    wait_ready_s: float | None = 0.0  # ...and its time ready to run (None: unreadable)
    rest_s: float = 0.0  # time between one batch and the next (the rest of the step)
    rest_cpu_s: float = 0.0  # the training thread's CPU time meanwhile
    _last: tuple[float, float] | None = None  # (wall, thread CPU) when the last batch came
    batches_profiled: int = 0
    probe_s: float = 0.0  # time inside __next__ in the steps at fewer torch threads
    probe_batches: int = 0
    trained: int = 0  # profiled batches a backward pass followed (runner/hooks.py)
    hashes: set[int] = field(default_factory=set)
    hashed: int = 0
    hashing: bool = field(init=False, default=False)  # batches still to hash (__post_init__)
    duplicates: int = 0
    pad_id: int | None = None  # the pad id its collate_fn was given, if it says
    padded: list[PaddedBatch] = field(default_factory=list)
    padded_rows: int = 0
    dataset: weakref.ref[Any] | None = None  # the map-style dataset, until its samples are probed
    probe: SampleProbe | None = None

    def timed(self, inner: Any, it: Any) -> Any:
        """`inner(it)` (the iterator's own __next__), timed in wall and thread CPU time.

        Thread CPU time beside wall time tells loading that waits (I/O: no CPU) from loading that
        computes; the same ratio over the rest of the step says how much CPU the thread gets at
        all, so a machine busy with other work does not make computing look like waiting.
        """
        q0 = thread_ready_s()
        t0, c0 = time.perf_counter(), time.thread_time()
        if self._last is not None:
            self.rest_s += t0 - self._last[0]
            self.rest_cpu_s += c0 - self._last[1]
        batch = inner(it)
        t1, c1 = time.perf_counter(), time.thread_time()
        q1 = thread_ready_s()
        self.wait_s += t1 - t0
        self.wait_cpu_s += c1 - c0
        if q0 is None or q1 is None or self.wait_ready_s is None:
            self.wait_ready_s = None
        else:
            self.wait_ready_s += q1 - q0
        self.batches_profiled += 1
        self._last = (t1, c1)
        return batch

    def probed(self, inner: Any, it: Any) -> Any:
        """`inner(it)` in a step at fewer torch threads (runner/window.py), timed in wall time."""
        t0 = time.perf_counter()
        batch = inner(it)
        self.probe_s += time.perf_counter() - t0
        self.probe_batches += 1
        return batch

    def came(self, it: Any, started: float | FirstSteps, phase: str) -> None:
        """A batch came while the epoch's start is timed: its first, or one of the next two."""
        if isinstance(started, FirstSteps):
            started.got = time.perf_counter()
        else:
            self.first_batch(it, started, phase)

    def first_batch(self, it: Any, started: float, phase: str) -> None:
        """An epoch's first batch came: keep the wall time since its iter(loader) call; after a
        restart of workers, time the next two steps (`FirstSteps`)."""
        now = time.perf_counter()
        self.first_batch_s.append(now - started)
        restarted = self.static.num_workers > 0 and len(self.first_batch_s) > 1
        timed = restarted and phase in UNTOUCHED
        it._torchpace_started = FirstSteps(now, phase) if timed else None

    def first_steps(self, it: Any, steps: FirstSteps, alone: bool, phase: str) -> float | None:
        """The second or third batch of a restarted epoch is asked for (`alone`: no other loader
        gave a batch since this one's last, and the doctor did no work of its own): the first
        step's extra time over the second (s), once both are in. Another loader read in between
        (an evaluation, zipped loaders) would count its own wait, the doctor's work (a window's
        end, a slow-step capture) its own time: the epoch is not timed then."""
        now = time.perf_counter()
        alone = alone and phase == steps.phase
        if alone and steps.first is None:
            steps.first = now - steps.got
            return None
        it._torchpace_started = None
        if not alone or steps.first is None:
            return None
        extra = max(0.0, steps.first - (now - steps.got))
        self.first_step_extra_s.append(extra)
        return extra

    def measure_padding(self, batch: Any) -> None:
        """Read the batch's padding (a few reductions; profiled steps only, see hooks._next)."""
        if self.padded_rows >= padding.MAX_ROWS_KEPT:
            return
        with contextlib.suppress(Exception):  # a batch the measure misreads is not measured
            found = padding.measure(batch, self.pad_id)
            if found is not None:
                self.padded.append(found)
                self.padded_rows += len(found.lengths)

    def probe_samples(self) -> None:
        """Read a few samples twice, once per loader (its first warm-up batch, see hooks._next)."""
        dataset = self.dataset() if self.dataset is not None else None
        self.dataset = None
        if dataset is not None:
            self.probe = samples.probe(dataset)

    def __post_init__(self) -> None:
        # Only multi-worker IterableDatasets can repeat rows through worker replicas; read at
        # every batch, so a flag, not a test of the configuration.
        self.hashing = self.static.iterable and self.static.num_workers > 1

    def hash_batch(self, batch: Any) -> None:
        """Remember a digest of the batch; count it when an earlier batch was identical."""
        digest = _digest(batch)
        if digest is None:
            return
        self.hashed += 1
        self.hashing = self.hashed < HASH_BATCHES
        if digest in self.hashes:
            self.duplicates += 1
        self.hashes.add(digest)


def _digest(batch: Any) -> int | None:
    import torch

    parts: list[bytes] = []
    size = 0
    stack = [batch]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            size += item.numel() * item.element_size()
            if size > HASH_MAX_BYTES or item.device.type != "cpu":
                return None
            parts.append(item.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return hash(b"".join(parts)) if parts else None


def _is_iterable(dataset: Any) -> bool:
    from torch.utils.data import IterableDataset

    return isinstance(dataset, IterableDataset)


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def shards_by_worker(dataset: Any) -> bool:
    """Whether the dataset's own code (methods, and module functions they call) asks which worker
    it runs in. A heuristic: sharding done elsewhere (a wrapper, a worker_init_fn) is not seen."""
    import torch

    torch_dir = torch.__file__.rsplit("/", 1)[0]
    module_globals: dict[str, Any] = {}
    names: set[str] = set()
    for cls in type(dataset).__mro__:
        module = __import__("sys").modules.get(cls.__module__)
        if module is None or (getattr(module, "__file__", "") or "").startswith(torch_dir):
            continue
        module_globals.update(vars(module))
        for value in vars(cls).values():
            func = getattr(value, "__func__", value)
            if isinstance(func, types.FunctionType):
                names |= _code_names(func.__code__)
    called = [module_globals.get(n) for n in names]
    for func in called:
        if isinstance(func, types.FunctionType):
            names |= _code_names(func.__code__)
    return bool({"get_worker_info", "worker_info"} & names)


def reads_live_buffer(dataset: Any) -> bool:
    """An IterableDataset holding a deque or queue (e.g. an RL replay buffer) reads live data."""
    try:
        values = list(vars(dataset).values())
    except TypeError:
        return False
    import multiprocessing.queues

    live = (*_LIVE_TYPES, multiprocessing.queues.Queue)
    return any(isinstance(v, live) for v in values)


def user_dataset(dataset: Any) -> Any:
    """The user's own dataset under torchpace's epoch wrappers (fast_loader adds one with workers).

    Judged by the user's class, not the wrapper's: its name, and whether its code shards by worker.
    """
    while type(dataset).__module__ == "torchpace.data.epochs" and hasattr(dataset, "dataset"):
        dataset = dataset.dataset
    return dataset


def _weak(dataset: Any) -> weakref.ref[Any] | None:
    try:
        return weakref.ref(dataset)
    except TypeError:  # not weak-referenceable (a list, a class with __slots__): not probed
        return None


def static_facts(loader: Any, created_at: SourceLocation | None) -> LoaderFacts:
    """A new DataLoader's configuration (fixed at construction), read without keeping it alive."""
    dataset = user_dataset(loader.dataset)
    iterable = _is_iterable(dataset)
    workers = int(loader.num_workers)
    return LoaderFacts(
        num_workers=workers,
        batch_size=loader.batch_size,
        pin_memory=bool(loader.pin_memory),
        persistent_workers=bool(loader.persistent_workers),
        prefetch_factor=loader.prefetch_factor if workers > 0 else None,
        iterable=iterable,
        shards_by_worker=shards_by_worker(dataset) if iterable else None,
        dataset_type=_type_name(dataset),
        pyg_transform=_pyg_transform(dataset),
        pyg_in_memory=_pyg_in_memory(dataset),
        created_at=created_at,
        worker_init_fn=loader.worker_init_fn is not None,
        live_source=reads_live_buffer(dataset) if iterable else None,
        batches_per_epoch=None if iterable else _length(loader),
    )


def _type_name(dataset: Any) -> str:
    """The dataset's class, and under torch's Subset (what `random_split` gives) the class it
    takes its samples from: Lightning's autoencoder example read as "Subset computes each sample
    again"."""
    name, inner = type(dataset).__name__, dataset
    while type(inner).__name__ == "Subset" and type(inner).__module__.startswith("torch.utils"):
        inner = getattr(inner, "dataset", None)
    return name if inner is dataset or inner is None else f"{type(inner).__name__} ({name})"


def _pyg_transform(dataset: Any) -> str:
    """A PyG dataset's per-read `transform` in words ("" for none, or another dataset)."""
    if not type(dataset).__module__.startswith("torch_geometric."):
        return ""
    transform = getattr(dataset, "transform", None)
    return repr(transform) if transform is not None else ""


def _pyg_in_memory(dataset: Any) -> bool:
    """A PyG InMemoryDataset without a `transform` (by its classes' names: no torch_geometric
    import)."""
    if not type(dataset).__module__.startswith("torch_geometric."):
        return False
    classes = {c.__name__ for c in type(dataset).__mro__}
    return "InMemoryDataset" in classes and getattr(dataset, "transform", None) is None


def _length(loader: Any) -> int | None:
    """len(loader) of a map-style loader (its sampler's length over the batch size); None when
    the sampler has none. Never asked of an IterableDataset: len() there is remembered by torch
    and turns into a warning when the dataset yields more than it said."""
    try:
        return len(loader)
    except Exception:  # a sampler without __len__, or one whose __len__ fails: unknown
        return None


def loader_facts(record: LoaderRecord, profiled_ms: float | None) -> LoaderFacts:
    """The loader's configuration plus what the run counted: epochs, waiting, repeated batches."""
    wait = None
    if profiled_ms and record.batches_profiled:
        wait = min(1.0, record.wait_s * 1000.0 / profiled_ms)
    cpu = min(1.0, record.wait_cpu_s / record.wait_s) if record.wait_s > 0 else None
    rest = min(1.0, record.rest_cpu_s / record.rest_s) if record.rest_s > 0 else None
    compute = None
    if record.wait_s > 0 and record.wait_ready_s is not None:
        blocked = max(0.0, record.wait_s - record.wait_cpu_s - record.wait_ready_s)
        busy = record.wait_cpu_s
        compute = busy / (busy + blocked) if busy + blocked > 0 else None
    return replace(
        record.static,
        epochs_started=record.epochs,
        first_batch_ms=tuple(s * 1000.0 for s in record.first_batch_s),
        first_step_extra_ms=tuple(s * 1000.0 for s in record.first_step_extra_s),
        wait_fraction=wait,
        wait_cpu_fraction=cpu,
        wait_compute_share=compute,
        rest_cpu_fraction=rest,
        duplicate_batches=record.duplicates if record.hashed else None,
        wait_ms_per_batch=(
            record.wait_s * 1000.0 / record.batches_profiled if record.batches_profiled else None
        ),
        wait_cpu_share=_cpu_share(record),
        padded_batches=tuple(record.padded),
        trained_batches=record.trained if record.batches_profiled else None,
        sample_probe=record.probe,
    )


def _cpu_share(record: LoaderRecord) -> float | None:
    """wait CPU / (wait CPU + rest CPU), per batch: n waits, and n - 1 gaps between them."""
    n = record.batches_profiled
    if n < 2:
        return None
    wait, rest = record.wait_cpu_s / n, record.rest_cpu_s / (n - 1)
    return wait / (wait + rest) if wait + rest > 0 else None


class LoaderSensor:
    """Patches DataLoader construction and iteration: one LoaderRecord per loader the script made."""

    def __init__(self) -> None:
        self.records: list[LoaderRecord] = []
        # Loader -> its record, without keeping loaders (and persistent workers) alive.
        self._by_loader: weakref.WeakKeyDictionary[Any, LoaderRecord] = weakref.WeakKeyDictionary()
        self._with_workers: weakref.WeakSet[Any] = weakref.WeakSet()  # iterators with workers
        # Told of each epoch's iterator and when its iter(loader) began (doctor --follow).
        self.on_iter: Callable[[Any, float], None] | None = None
        self.before_iter: Callable[[Any], None] | None = None  # --follow --epochs: may stop

    def install(self, patcher: Patcher) -> None:
        """Patch the DataLoader class (undone by the patcher's restore())."""
        import torch.utils.data.dataloader as dl

        patcher.wrap(dl.DataLoader, "__init__", self._wrap_init)
        patcher.wrap(dl.DataLoader, "__iter__", self._wrap_iter)

    def shut_down_workers(self) -> None:
        """End the worker processes of every iterator still alive, each through its own shutdown.

        The script is over, but its namespace (functions and their globals form a cycle) is freed
        by the garbage collector, which runs weakref callbacks before __del__: each index queue's
        finalizer queues the end of its feeder thread, then the iterator's shutdown queues the
        workers' stop message behind it, never sent, and torch waits 5 s per worker (makemore
        keeps an endless iterator with 4 workers in a global: 20 s at the end of every doctor
        run and every --verify run). Ended here, the queues still deliver."""
        for it in list(self._with_workers):
            shutdown = getattr(it, "_shutdown_workers", None)  # torch's own, since 2018
            if shutdown is not None:
                with contextlib.suppress(Exception):
                    shutdown()

    def facts(self, profiled_ms: float | None) -> tuple[LoaderFacts, ...]:
        """Every loader's record, its waiting measured over `profiled_ms` of profiled steps."""
        return tuple(loader_facts(r, profiled_ms) for r in self.records)

    def loading_ratio(self) -> float | None:
        """The wait per batch in the steps at fewer torch threads over the profiled steps' wait
        per batch, every loader's together; None where either has no batch."""
        profiled = sum(r.batches_profiled for r in self.records)
        probed = sum(r.probe_batches for r in self.records)
        wait = sum(r.wait_s for r in self.records)
        if not (profiled and probed and wait > 0):
            return None
        return sum(r.probe_s for r in self.records) / probed / (wait / profiled)

    def _wrap_init(self, original: Any) -> Any:
        sensor = self

        def __init__(loader: Any, *args: Any, **kwargs: Any) -> None:
            original(loader, *args, **kwargs)
            if loader not in sensor._by_loader:
                record = LoaderRecord(static_facts(loader, user_location()))
                record.pad_id = padding.collate_pad_id(loader.collate_fn)
                if not record.static.iterable:
                    record.dataset = _weak(user_dataset(loader.dataset))
                sensor._by_loader[loader] = record
                sensor.records.append(record)

        return __init__

    def _wrap_iter(self, original: Any) -> Any:
        records = self._by_loader
        with_workers = self._with_workers
        sensor = self

        def __iter__(loader: Any, *args: Any, **kwargs: Any) -> Any:
            record = records.get(loader)
            if record is not None and sensor.before_iter is not None:
                sensor.before_iter(record)  # raises StopScript before any worker starts
            started = time.perf_counter()  # workers start inside: timed to the first batch
            it = original(loader, *args, **kwargs)
            if getattr(it, "_workers", None):
                with contextlib.suppress(TypeError):  # not weak-referenceable: left to torch
                    with_workers.add(it)
            if record is not None:
                record.epochs += 1
                pinned = getattr(it, "_pin_memory", None)  # what torch does, not what was asked:
                if isinstance(pinned, bool) and pinned != record.static.pin_memory:
                    # without an accelerator torch pins nothing (and warns)
                    record.static = replace(record.static, pin_memory=pinned)
                # An iterator with __slots__ gets no per-loader timing.
                with contextlib.suppress(AttributeError):
                    it._torchpace_loader = record
                    it._torchpace_started = started  # hooks._next: the first batch's time
                    if sensor.on_iter is not None:
                        sensor.on_iter(it, started)
            return it

        return __iter__
