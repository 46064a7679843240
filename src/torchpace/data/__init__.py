"""The input pipeline: fast loaders, device prefetching, sharded iterables, bucketing samplers.

Each part fixes one way the accelerator ends up waiting on (or wrongly fed by) the input:
`fast_loader`/`autotune_workers` (loader settings), `DevicePrefetcher` (copies overlap compute),
`set_epoch`/`epoch_aware` (epochs reach persistent workers), `ShardedIterableDataset` (each row once
across workers and ranks), `BucketBatchSampler`/`TokenBudgetBatchSampler` and `pad_collate` (little
padding, equal batch counts per DDP rank). See docs/data.md.
"""

from torchpace.data.collate import pad_collate
from torchpace.data.epochs import (
    EpochAwareDataset,
    EpochAwareIterableDataset,
    SharedEpoch,
    epoch_aware,
    set_epoch,
)
from torchpace.data.loaders import (
    autotune_workers,
    default_num_workers,
    fast_loader,
    measure_workers,
)
from torchpace.data.prefetch import DevicePrefetcher
from torchpace.data.samplers import BucketBatchSampler, TokenBudgetBatchSampler
from torchpace.data.sharding import ShardedIterableDataset

__all__ = [
    "BucketBatchSampler",
    "DevicePrefetcher",
    "EpochAwareDataset",
    "EpochAwareIterableDataset",
    "ShardedIterableDataset",
    "SharedEpoch",
    "TokenBudgetBatchSampler",
    "autotune_workers",
    "default_num_workers",
    "epoch_aware",
    "fast_loader",
    "measure_workers",
    "pad_collate",
    "set_epoch",
]
