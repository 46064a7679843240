"""Step-level fixes: precision, compile, accumulation, checkpointing, memory warm-up, batch size."""

from torchpace.train.batch_size import find_batch_size, is_oom, release_memory, scale_lr
from torchpace.train.checkpointing import checkpoint_modules
from torchpace.train.precision import Precision
from torchpace.train.speedups import AppliedSpeedups, Change, apply_speedups
from torchpace.train.step import StepOutput, TrainStep
from torchpace.train.warmup import MemoryWarmup, warmup_memory

__all__ = [
    "AppliedSpeedups",
    "Change",
    "MemoryWarmup",
    "Precision",
    "StepOutput",
    "TrainStep",
    "apply_speedups",
    "checkpoint_modules",
    "find_batch_size",
    "is_oom",
    "release_memory",
    "scale_lr",
    "warmup_memory",
]
