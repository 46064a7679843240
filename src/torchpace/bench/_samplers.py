"""Plain-torch stand-ins for torchpace.data's bucketing samplers (replaced once they land)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Sampler


class _LengthBatches(Sampler[list[int]]):
    def __init__(
        self, lengths: Sequence[int], batch_size: int, budget: int | None, seed: int
    ) -> None:
        self.lengths, self.batch_size, self.budget, self.seed, self.epoch = (
            lengths,
            batch_size,
            budget,
            seed,
            0,
        )
        self._len = sum(1 for _ in self._batches(0))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self._len

    def _batches(self, epoch: int) -> list[list[int]]:
        g = torch.Generator().manual_seed(self.seed * 7919 + epoch)
        order = torch.randperm(len(self.lengths), generator=g).tolist()
        pool = 50 * self.batch_size
        batches: list[list[int]] = []
        for start in range(0, len(order), pool):
            chunk = sorted(order[start : start + pool], key=lambda i: self.lengths[i])
            batches.extend(self._split(chunk))
        perm = torch.randperm(len(batches), generator=g).tolist()
        return [batches[i] for i in perm]

    def _split(self, chunk: list[int]) -> list[list[int]]:
        if self.budget is None:
            return [
                chunk[i : i + self.batch_size]
                for i in range(0, len(chunk) - self.batch_size + 1, self.batch_size)
            ]
        out: list[list[int]] = []
        cur: list[int] = []
        for i in chunk:
            if cur and (len(cur) + 1) * self.lengths[i] > self.budget:
                out.append(cur)
                cur = []
            cur.append(i)
        if cur:
            out.append(cur)
        return out

    def __iter__(self) -> Iterator[list[int]]:
        yield from self._batches(self.epoch)


def bucket_sampler(lengths: Sequence[int], batch_size: int, seed: int) -> Sampler[list[int]]:
    return _LengthBatches(lengths, batch_size, None, seed)


def token_budget_sampler(lengths: Sequence[int], budget: int, seed: int) -> Sampler[list[int]]:
    return _LengthBatches(lengths, 1, budget, seed)
