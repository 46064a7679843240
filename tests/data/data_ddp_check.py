"""Run under torchrun (2 ranks, gloo): sharded dataset and both samplers, checked across ranks.

Each rank iterates its share; rank 0 gathers everything and writes a JSON verdict to argv[1].
"""

from __future__ import annotations

import collections
import json
import sys

import numpy as np
import torch.distributed as dist

from torchpace.data import (
    BucketBatchSampler,
    ShardedIterableDataset,
    TokenBudgetBatchSampler,
    fast_loader,
    set_epoch,
)


def _sharded(epoch: int) -> list[int]:
    dataset = ShardedIterableDataset(range(101), even="pad")  # rank and world from the group
    loader = fast_loader(dataset, batch_size=4, num_workers=2)
    set_epoch(loader, epoch)
    rows = [i for batch in loader for i in batch.tolist()]
    del loader
    return rows


def _sampler_batches(kind: str, epoch: int) -> list[list[int]]:
    lengths = np.random.default_rng(0).lognormal(4, 0.7, 500).astype(int).clip(1, 600)
    if kind == "bucket":
        sampler = BucketBatchSampler(lengths, 8, seed=5)
    else:
        sampler = TokenBudgetBatchSampler(lengths, 2048, seed=5)
    sampler.set_epoch(epoch)
    return list(sampler)


def main() -> None:
    dist.init_process_group("gloo")
    mine = {"rank": dist.get_rank()}
    for epoch in range(2):
        mine[f"sharded{epoch}"] = _sharded(epoch)
        for kind in ("bucket", "budget"):
            mine[f"{kind}{epoch}"] = _sampler_batches(kind, epoch)
    everyone: list[dict] = [{} for _ in range(dist.get_world_size())]
    dist.all_gather_object(everyone, mine)
    if dist.get_rank() == 0:
        verdict = {}
        for key in mine:
            if key == "rank":
                continue
            parts = [rank[key] for rank in everyone]
            flat = [i for part in parts for x in part for i in (x if isinstance(x, list) else [x])]
            verdict[key] = {
                "counts": [len(part) for part in parts],
                "repeats": sum(c - 1 for c in collections.Counter(flat).values()),
                "distinct": len(set(flat)),
            }
        with open(sys.argv[1], "w") as out:
            json.dump(verdict, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
