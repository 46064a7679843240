"""ShardedIterableDataset: every row exactly once per epoch across DataLoader workers x DDP ranks.

A plain IterableDataset is copied into every worker and every rank, so each copy yields every row:
with W workers and R ranks each row arrives W*R times per epoch. Here row i of the source goes to
slot i mod (R*W) and slot rank*W + worker keeps it. Each worker still reads (and skips) the rows of
the other slots, so the source should be cheap to iterate past; expensive decoding belongs after
sharding (in `transform`).

DDP needs every rank to run the same number of steps, or the ranks that finish early hang the
others in all-reduce. `even="drop"` truncates the epoch to a multiple of R*W rows and `even="pad"`
tops it up by repeating the first rows (as DistributedSampler does), so every worker on every rank
yields the same number of rows, hence the same number of batches. Both need the row count: pass
`length=`, give a source with `__len__`, or the dataset counts it with one pass at construction.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

from torch.utils.data import IterableDataset, get_worker_info

from torchpace.data._dist import resolve_replicas
from torchpace.data.epochs import SharedEpoch

Even = Literal["drop", "pad"]


class ShardedIterableDataset(IterableDataset):  # type: ignore[type-arg]
    """Shard a re-iterable source over DataLoader workers x DDP ranks, each row once per epoch.

    Args:
        source: re-iterable rows (a list, an IterableDataset, anything `iter()` restarts; an
            iterator such as a generator is refused, TypeError: it would leave later epochs
            empty); if it has `set_epoch`, it is called in each worker with the current epoch
            before iterating.
        num_replicas, rank: the DDP layout; default from torch.distributed, else (1, 0).
        even: None (each row exactly once; ranks may differ by one row per worker slot), "drop"
            or "pad" (equal rows per worker and rank so DDP cannot hang).
        length: rows per epoch, when `even` is set and the source has no `__len__`.
        transform: applied to each row this slot keeps (decode after sharding, not before).
    """

    # Marker read by torchpace.data.set_epoch: the epoch lives in shared memory.
    epoch_shared_with_workers = True

    def __init__(
        self,
        source: Iterable[Any],
        *,
        num_replicas: int | None = None,
        rank: int | None = None,
        even: Even | None = None,
        length: int | None = None,
        transform: Callable[[Any], Any] | None = None,
    ) -> None:
        if even not in (None, "drop", "pad"):
            raise ValueError(f"even must be None, 'drop' or 'pad', got {even!r}")
        if length is not None and length < 0:
            raise ValueError(f"length must be >= 0, got {length}")
        _check_reiterable(source)
        self.source = source
        self.num_replicas, self.rank = resolve_replicas(num_replicas, rank)
        self.even = even
        self.transform = transform
        self._length = length
        self._epoch = SharedEpoch(0)
        if even is not None:
            self._rows()  # count now, in the main process: workers inherit the count
        if self.num_replicas > 1 and even is None:
            warnings.warn(
                "ShardedIterableDataset with num_replicas > 1 and even=None: ranks can get a "
                "different number of batches and hang DDP; pass even='drop' or even='pad'",
                stacklevel=2,
            )

    @property
    def epoch(self) -> int:
        """The current epoch (shared with worker processes)."""
        return self._epoch.get()

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch for the next iteration, in this process and in persistent workers."""
        self._epoch.set(epoch)

    def _rows(self) -> int:
        if self._length is None:
            try:
                self._length = len(self.source)  # type: ignore[arg-type]
            except TypeError:
                self._length = sum(1 for _ in self._iter_source())
        return self._length

    def _target_rows(self, slots: int) -> int:
        """Rows in this epoch after evening out, over all slots."""
        rows = self._rows()
        if self.even == "drop":
            return rows // slots * slots
        return -(-rows // slots) * slots  # pad: round up

    def __len__(self) -> int:
        """Rows this rank yields per epoch over all its workers; needs the row count."""
        workers = get_worker_info()
        per_worker = 1 if workers is None else workers.num_workers
        slots = self.num_replicas * per_worker
        total = self._rows() if self.even is None else self._target_rows(slots)
        return sum(_count(total, self.rank * per_worker + w, slots) for w in range(per_worker))

    def _iter_source(self) -> Iterator[Any]:
        if callable(getattr(self.source, "set_epoch", None)):
            self.source.set_epoch(self.epoch)  # type: ignore[attr-defined]
        return iter(self.source)

    def _slot(self) -> tuple[int, int]:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        return self.rank * workers + worker, self.num_replicas * workers

    def __iter__(self) -> Iterator[Any]:
        slot, slots = self._slot()
        rows: Iterator[Any] = self._iter_source()
        if self.even == "drop":
            rows = itertools.islice(
                _checked(rows, self._rows(), exact=False), self._target_rows(slots)
            )
        elif self.even == "pad":
            rows = _checked(rows, self._rows(), exact=True)
            rows = _padded(rows, self._target_rows(slots) - self._rows(), self._iter_source)
        for row in itertools.islice(rows, slot, None, slots):
            yield row if self.transform is None else self.transform(row)


def _check_reiterable(source: Iterable[Any]) -> None:
    """TypeError for a one-shot source: an iterator (a generator, `map(...)`, an open file) is
    spent by the first epoch (or by counting its rows), so every later epoch would be empty."""
    if isinstance(source, Iterator):
        raise TypeError(
            f"ShardedIterableDataset needs a source that iter() restarts each epoch, got a "
            f"{type(source).__name__}, which can be iterated only once (the next epoch would be "
            "empty); pass a list, or an object whose __iter__ makes a fresh iterator, e.g. a "
            "class with `def __iter__(self): return read_rows(self.path)`"
        )


def _count(total: int, slot: int, slots: int) -> int:
    """How many of positions 0..total-1 are congruent to slot mod slots."""
    return max(0, -(-(total - slot) // slots))


def _checked(rows: Iterator[Any], expected: int, *, exact: bool) -> Iterator[Any]:
    """Yield rows; fail loudly if the source's row count is not the one evening out relied on.

    A wrong count would give the ranks different numbers of batches: DDP would hang, not fail.
    """
    count = 0
    for row in rows:
        count += 1
        if exact and count > expected:
            break
        yield row
    if count < expected or (exact and count > expected):
        more = "more than" if count > expected else f"only {count} rows, not"
        raise ValueError(
            f"ShardedIterableDataset: the source yielded {more} the {expected} rows it was told "
            "(length= or len(source)); pass the true row count, or even=None"
        )


def _padded(rows: Iterator[Any], pad: int, restart: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """All rows, then the first `pad` rows again (cycling if the source is shorter than pad)."""
    yield from rows
    if pad <= 0:
        return
    seen = 0
    while seen < pad:
        fresh = list(itertools.islice(restart(), pad - seen))
        if not fresh:
            raise ValueError(
                "ShardedIterableDataset(even='pad'): the source is empty, nothing to pad with"
            )
        yield from fresh
        seen += len(fresh)
