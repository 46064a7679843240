"""What the doctor saw of live objects while a script ran: plain data, no torch import.

Filled by doctor/inspect.py (issue: `torchpace doctor`); read by "live" rules and by trace rules
registered with live=True. Every field is optional: None means "not observed", never "false".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchpace.doctor.finding import SourceLocation


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
    created_at: SourceLocation | None = None


@dataclass(frozen=True)
class Inspection:
    """Live facts gathered in-process; the trace rules with live=True read the precision fields."""

    device_kind: str = "cpu"  # "cpu", "cuda", "rocm", "mps"
    device_name: str | None = None
    compute_capability: tuple[int, int] | None = None
    bf16_supported: bool | None = None
    cpu_cores: int | None = None
    torch_threads: int | None = None
    world_size: int = 1
    # Precision and math modes, as seen during the profiled forward passes.
    autocast_in_forward: bool | None = None
    autocast_dtype: str | None = None  # "bfloat16", "float16"
    grad_scaler_used: bool | None = None
    tf32_matmul: bool | None = None  # torch.backends.cuda.matmul.allow_tf32 / matmul precision
    tf32_cudnn: bool | None = None
    float32_matmul_precision: str | None = None
    cudnn_benchmark: bool | None = None
    compiled: bool | None = None  # torch.compile in use
    loaders: tuple[LoaderFacts, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
