"""Read a few samples of a map-style dataset twice: what one costs, and whether it is the same.

A dataset that decodes and resizes the same items every epoch can keep the result instead, but
only if a sample is the same each time it is read: random augmentation must stay per read. The
probe reads `dataset[i]` twice for a couple of indices, in the main process, on a shallow copy of
the dataset (a file handle a __getitem__ opens lazily stays with the copy, and never reaches the
workers forked later), with the random generators (random, numpy, torch) put back afterwards so
the script's random stream is unchanged. A read that draws from one of them, or two reads that
differ, mean the samples are random. Thread CPU time (not wall time) is what a read costs, the
same on a quiet and a busy machine. Beside it, what the same read costs from memory, timed the
same way: a TensorDataset holding tensors as many as the sample's (a dataset already in memory
reads at about this cost, and caching it saves nothing).
"""

from __future__ import annotations

import contextlib
import copy
import random
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from torchpace.cores import thread_ready_s
from torchpace.runner.load import available_bytes

READS = 2  # reads of each index
MAX_READ_S = 2.0  # stop after a read this slow (the probe must stay cheap)
MAX_HASH_BYTES = 64 << 20


@dataclass(frozen=True)
class SampleProbe:
    """What reading the same samples twice showed."""

    cpu_ms: float  # the main thread's CPU time per read (the cheaper read of each index)
    cached_ms: float  # the same read from a TensorDataset: what a read costs once cached
    wall_ms: float
    # Share of a read that computes: CPU / (CPU + blocked), run-queue time left out (load-proof).
    compute_share: float | None
    same: bool | None  # both reads of each index were equal; None: not comparable (no arrays)
    draws_random: bool  # a read advanced random, numpy's or torch's generator
    sample_bytes: int  # the arrays in one sample
    dataset_len: int
    available_bytes: int | None  # memory the process could still take when probed


class _Fingerprint:
    """A digest and the byte size of the tensors/arrays in a sample (None if it holds none)."""

    def __init__(self, sample: Any) -> None:
        self.parts: list[bytes] = []
        self.nbytes = 0
        self.arrays = 0
        self.too_big = False
        for array in _arrays(sample):
            self.arrays += 1
            self.nbytes += array.nbytes
            if self.nbytes > MAX_HASH_BYTES:
                self.too_big = True
                break
            self.parts.append(array.tobytes())

    @property
    def digest(self) -> int | None:
        return None if self.too_big or not self.parts else hash(b"".join(self.parts))


MAX_WALKED = 1000  # items of one sample looked into: a sample is a few tensors, not a graph


def _arrays(value: Any) -> Iterator[Any]:
    """numpy views of the tensors and arrays in a sample (PIL images through __array_interface__),
    also inside plain objects' attributes: PyG's `Data` keeps its tensors in a mapping it holds,
    and with none found its samples were "not comparable" (IMDB-BINARY, re-transformed every
    epoch by `OneHotDegree`, went unseen)."""
    import numpy as np
    import torch

    stack, seen = [value], set[int]()
    while stack and len(seen) < MAX_WALKED:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            if item.device.type == "cpu" and not item.is_sparse:
                yield item.detach().contiguous().view(-1).view(torch.uint8).numpy()
        elif isinstance(item, np.ndarray) or hasattr(item, "__array_interface__"):
            array = np.ascontiguousarray(item)
            if array.dtype != object:
                yield array.view(np.uint8).reshape(-1)
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif not isinstance(item, type) and isinstance(getattr(item, "__dict__", None), dict):
            stack.extend(vars(item).values())


def _rng_states() -> tuple[Any, Any, Any]:
    import torch

    numpy = sys.modules.get("numpy")
    np_state = numpy.random.get_state() if numpy is not None else None
    return random.getstate(), np_state, torch.get_rng_state()


def _same_rng(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any]) -> bool:
    import numpy as np
    import torch

    same_np = a[1] is None or all(
        np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
        for x, y in zip(a[1], b[1], strict=True)
    )
    return a[0] == b[0] and same_np and bool(torch.equal(a[2], b[2]))


def _restore(states: tuple[Any, Any, Any]) -> None:
    import torch

    random.setstate(states[0])
    numpy = sys.modules.get("numpy")
    if numpy is not None and states[1] is not None:
        numpy.random.set_state(states[1])
    torch.set_rng_state(states[2])


@dataclass
class _Read:
    cpu_s: float
    wall_s: float
    ready_s: float | None
    fingerprint: _Fingerprint
    drew: bool


def _read(dataset: Any, index: int) -> _Read:
    before = _rng_states()
    r0, t0, c0 = thread_ready_s(), time.perf_counter(), time.thread_time()
    sample = dataset[index]
    c1, t1, r1 = time.thread_time(), time.perf_counter(), thread_ready_s()
    ready = r1 - r0 if r0 is not None and r1 is not None else None
    return _Read(
        c1 - c0, t1 - t0, ready, _Fingerprint(sample), not _same_rng(before, _rng_states())
    )


def _twin(arrays: int) -> Any:
    """The sample's in-memory twin: a TensorDataset of as many tensors. It is read right after
    each of the dataset's reads, the same way, so both times see the same warm or cold caches."""
    import torch
    from torch.utils.data import TensorDataset

    return TensorDataset(*(torch.zeros(2, 1) for _ in range(max(1, arrays))))


def probe(dataset: Any) -> SampleProbe | None:
    """Read two samples twice each (see the module doc); None when the dataset cannot be read so."""
    try:
        size = len(dataset)
        replica = copy.copy(dataset)
    except Exception:  # no length, or an object that cannot be copied: no probe
        return None
    if size < 1:
        return None
    states = _rng_states()
    reads: list[list[_Read]] = []
    twins: list[list[float]] = []  # CPU seconds of the in-memory twin's read after each read
    try:
        for index in dict.fromkeys((0, size // 2)):
            reads.append([])
            twins.append([])
            for _ in range(READS):
                reads[-1].append(_read(replica, index))
                twins[-1].append(_read(_twin(reads[-1][-1].fingerprint.arrays), 1).cpu_s)
                if reads[-1][-1].wall_s > MAX_READ_S:  # enough: the probe must stay cheap
                    return _summary(reads, twins, size)
    except Exception:  # the script's own reads will say what is wrong, not the probe
        return None
    finally:
        _restore(states)
        del replica
    return _summary(reads, twins, size)


# complex: the SampleProbe's fields, each with its own unknown case.
def _summary(reads: list[list[_Read]], twins: list[list[float]], size: int) -> SampleProbe:
    cheapest = [min(r, key=lambda x: x.cpu_s) for r in reads]
    cpu = sum(r.cpu_s for r in cheapest) / len(cheapest)
    wall = sum(r.wall_s for r in cheapest) / len(cheapest)
    compute = None
    if all(r.ready_s is not None for r in cheapest):
        blocked = max(0.0, wall - cpu - sum(r.ready_s or 0.0 for r in cheapest) / len(cheapest))
        compute = cpu / (cpu + blocked) if cpu + blocked > 0 else None
    digests = [[r.fingerprint.digest for r in pair] for pair in reads if len(pair) == READS]
    comparable = bool(digests) and all(None not in pair for pair in digests)
    return SampleProbe(
        cpu_ms=cpu * 1e3,
        cached_ms=sum(min(t) for t in twins) * 1e3 / len(twins),
        wall_ms=wall * 1e3,
        compute_share=compute,
        same=all(len(set(pair)) == 1 for pair in digests) if comparable else None,
        draws_random=any(r.drew for pair in reads for r in pair),
        sample_bytes=reads[0][0].fingerprint.nbytes,
        dataset_len=size,
        available_bytes=_available(),
    )


def _available() -> int | None:
    with contextlib.suppress(Exception):
        return available_bytes()
    return None
