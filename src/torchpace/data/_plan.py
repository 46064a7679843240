"""The global batch plan shared by the bucketing samplers: the same on every rank for (seed, epoch).

Every rank computes the whole plan from (seed, epoch, lengths) with no communication and keeps its
column: the plan is a list of steps, each step one batch per rank. A step pairs batches of similar
cost, so no rank waits long for a straggler at the all-reduce, and steps are dealt largest first
with the biggest batch to the rank with the fewest tokens so far, so token totals stay close.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Batch = np.ndarray  # int64 sample indices


def as_lengths(lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """Lengths as an int64 array, validated."""
    array = np.asarray(lengths, dtype=np.int64)
    if array.ndim != 1:
        raise ValueError(f"lengths must be one length per sample (1-D), got shape {array.shape}")
    if array.size and array.min() < 0:
        bad = int(np.argmin(array))
        raise ValueError(f"lengths must be >= 0, got {int(array[bad])} at index {bad}")
    return array


def rng_for(seed: int, epoch: int) -> np.random.Generator:
    """A generator that depends only on (seed, epoch): identical on every rank and platform."""
    return np.random.default_rng([seed, epoch])


def pool_sorted(order: np.ndarray, lengths: np.ndarray, pool_size: int) -> np.ndarray:
    """Sort `order` by length within consecutive pools, alternating direction pool by pool.

    Alternating (ascending, then descending) makes a batch that straddles two pools join the long
    end of one pool with the long end of the next, instead of the longest with the shortest.
    """
    parts = []
    for k, start in enumerate(range(0, len(order), pool_size)):
        chunk = order[start : start + pool_size]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        parts.append(chunk[::-1] if k % 2 else chunk)
    return np.concatenate(parts) if parts else order


def padded_cost(batch: Batch, lengths: np.ndarray, multiple_of: int = 1) -> int:
    """Tokens the batch costs once padded: its longest length (rounded up) times its size."""
    if len(batch) == 0:
        return 0
    longest = int(lengths[batch].max())
    return -(-longest // multiple_of) * multiple_of * len(batch)


def assign_steps(batches: list[Batch], costs: list[int], replicas: int) -> list[list[Batch]]:
    """Group batches into steps of similar cost, one batch per rank, balancing rank totals.

    Batches sorted by cost, largest first, are cut into steps of `replicas` neighbours (similar
    work on every rank in a step); within each step the largest batch goes to the rank with the
    lowest total so far. A rank that got a long batch early catches up over the following steps,
    so totals end within about one step's spread of the smallest batches.
    """
    assert len(batches) % replicas == 0, "the plan must give every rank the same number of batches"
    order = sorted(range(len(batches)), key=lambda i: (-costs[i], i))
    totals = [0] * replicas
    steps: list[list[Batch]] = []
    for start in range(0, len(order), replicas):
        ranks = sorted(range(replicas), key=lambda r: (totals[r], r))
        step: list[Batch] = [batches[0]] * replicas
        for index, rank in zip(order[start : start + replicas], ranks, strict=True):
            step[rank] = batches[index]
            totals[rank] += costs[index]
        steps.append(step)
    return steps


def shuffle_steps(steps: list[list[Batch]], rng: np.random.Generator) -> list[list[Batch]]:
    """The steps in a random order (each step's batches stay together)."""
    return [steps[i] for i in rng.permutation(len(steps))]


def repeat_to(order: np.ndarray, size: int) -> np.ndarray:
    """`order` cycled to `size` entries (only when there are fewer samples than ranks)."""
    return np.resize(order, size) if len(order) else order
