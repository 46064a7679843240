"""DevicePrefetcher: copy the next batch to the accelerator on a side stream while this one computes.

Design: no background thread. The iterator keeps exactly one batch in flight: when the consumer
takes batch i, batch i+1 is fetched from the loader and its host-to-device copy is *enqueued* on the
side stream; the copy then runs on the device's copy engine while the consumer's kernels for batch i
run. The host side of fetching is already asynchronous where it matters (DataLoader workers and its
pin-memory thread), so a thread of our own would add GIL contention, a queue, and shutdown paths
(break, exception, garbage collection) without moving any more work off the critical path. Without
a thread, errors surface in order, nothing outlives the iterator, and `break` needs no clean-up.

Stream ordering, per batch (each step is needed for correctness, not only speed):
1. the side stream waits on the consumer stream before the copy, so the copy and the device
   transform never read memory the consumer is still writing (e.g. normalisation constants);
2. the copy and the transform run on the side stream (one stream per prefetcher, created once: a
   stream per epoch is what grew reserved memory in the classic prefetcher);
3. at hand-off the consumer stream waits on the side stream, and every produced tensor is
   `record_stream`-ed to the consumer stream so the caching allocator does not hand its memory to
   the next copy while the consumer's kernels still read it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from torchpace.data import streams
from torchpace.data._tree import iter_tensors, map_tensors
from torchpace.policy.devices import default_device

_END = object()


def _resolve_device(device: torch.device | str | int | None) -> torch.device:
    if device is None:
        return default_device()
    resolved = torch.device(device)
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"DevicePrefetcher: device={str(device)!r} but torch.cuda.is_available() is False; "
                "pass device=None to use the available accelerator (or the CPU)"
            )
        if resolved.index is None:
            resolved = torch.device("cuda", torch.cuda.current_device())
    return resolved


class DevicePrefetcher:
    """Iterate a loader with each batch already on `device`, copied one batch ahead on a side stream.

    Args:
        loader: any iterable of batches (usually a DataLoader with pin_memory=True).
        device: target device; None picks the current accelerator, or the CPU without one.
        transform: runs on the device, on the side stream, after the copy (e.g. uint8 -> float).
    """

    def __init__(
        self,
        loader: Iterable[Any],
        device: torch.device | str | int | None = None,
        *,
        transform: Callable[[Any], Any] | None = None,
    ) -> None:
        self.loader = loader
        self.device = _resolve_device(device)
        self.transform = transform
        self._ops = streams.stream_ops_for(self.device)
        self._side_stream: Any = None
        self._checked_pinned = False  # the first batch tells whether the loader pins memory

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    @property
    def dataset(self) -> Any:
        """The loader's dataset."""
        return self.loader.dataset  # type: ignore[attr-defined]

    @property
    def sampler(self) -> Any:
        """The loader's sampler."""
        return self.loader.sampler  # type: ignore[attr-defined]

    @property
    def batch_sampler(self) -> Any:
        """The loader's batch sampler."""
        return self.loader.batch_sampler  # type: ignore[attr-defined]

    def set_epoch(self, epoch: int) -> None:
        """Forward to torchpace.data.set_epoch(loader, epoch); call it before iterating."""
        from torchpace.data.epochs import set_epoch

        set_epoch(self.loader, epoch)

    def __iter__(self) -> Iterator[Any]:
        if self._ops is not None and self._side_stream is None:
            self._side_stream = self._ops.new_stream()  # once per prefetcher, never per epoch
        return _PrefetchIterator(self, iter(self.loader))

    def _prepare(self, batch: Any) -> Any:
        """Enqueue the copy (and transform) of one host batch; runs one batch ahead."""
        if self._ops is None:
            if self.device.type != "cpu":  # a device without streams: a plain copy
                batch = map_tensors(batch, lambda t: t.to(self.device, non_blocking=True))
            return batch if self.transform is None else self.transform(batch)
        if not self._checked_pinned:
            self._checked_pinned = True
            _warn_if_pageable(batch)
        self._ops.wait_stream(self._side_stream, self._ops.current_stream())
        with self._ops.use(self._side_stream):
            batch = map_tensors(batch, lambda t: t.to(self.device, non_blocking=True))
            if self.transform is not None:
                batch = self.transform(batch)
        return batch

    def _hand_over(self, batch: Any) -> None:
        """Order the consumer stream after the batch's copy; the allocator learns who uses it."""
        if self._ops is None:
            return
        consumer = self._ops.current_stream()
        self._ops.wait_stream(consumer, self._side_stream)
        for tensor in iter_tensors(batch):
            if tensor.device.type == self.device.type:
                self._ops.record_stream(tensor, consumer)


class _PrefetchIterator:
    """One epoch of a DevicePrefetcher: holds the next batch, already enqueued for copy."""

    def __init__(self, owner: DevicePrefetcher, source: Iterator[Any]) -> None:
        self._owner = owner
        self._source: Iterator[Any] | None = source
        self._index = 0  # index of the batch the next _preload fetches
        self._error: BaseException | None = None
        self._pending: Any = _END
        self._preload()

    def __iter__(self) -> _PrefetchIterator:
        return self

    def _preload(self) -> None:
        self._pending = _END
        if self._source is None:
            return
        try:
            batch = next(self._source)
            self._pending = self._owner._prepare(batch)
        except StopIteration:
            self._source = None
        except Exception as error:
            # Deferred: the consumer still gets every batch before this one, then this error.
            _annotate(error, self._index)
            self._error = error
            self._release()
        self._index += 1

    def _release(self) -> None:
        """Stop the source now: its workers would otherwise live until the next gc pass.

        A DataLoader iterator that raised sits in a reference cycle (exception -> traceback ->
        frame -> exception), so it is freed by the cycle collector, which then waits 5 s per
        worker to join it. Persistent workers belong to the loader and stay up for the next epoch.
        """
        source, self._source = self._source, None
        if getattr(self._owner.loader, "persistent_workers", False):
            return
        shutdown = getattr(source, "_shutdown_workers", None) or getattr(source, "close", None)
        if callable(shutdown):
            shutdown()

    def __next__(self) -> Any:
        batch = self._pending
        if batch is _END:
            error, self._error = self._error, None
            if error is not None:
                raise error
            raise StopIteration
        self._owner._hand_over(batch)
        self._preload()
        return batch


def _warn_if_pageable(batch: Any) -> None:
    host = [t for t in iter_tensors(batch) if t.device.type == "cpu"]
    if host and not all(t.is_pinned() for t in host):
        warnings.warn(
            "DevicePrefetcher: the loader's batches are not in pinned memory, so their copies "
            "cannot overlap compute; build it with pin_memory=True (fast_loader does when an "
            "accelerator is available)",
            stacklevel=6,  # the user's iter(): _prepare, _preload, __init__, __iter__
        )


def _annotate(error: BaseException, index: int) -> None:
    note = f"torchpace DevicePrefetcher: raised while the loader produced batch {index}"
    if hasattr(error, "add_note"):
        error.add_note(note)
