"""What one benchmark configuration runs with: the run config a technique changes, and the settings."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from torchpace.policy.window import check_window

Amp = Literal["off", "bf16", "fp16"]
Batching = Literal["fixed", "bucket", "token-budget"]
Kind = Literal["baseline", "single", "cumulative", "ceiling", "peer"]  # a configuration's row


@dataclass(frozen=True)
class RunConfig:
    """How one configuration trains; the naive baseline is the default of every field."""

    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetcher: bool = False
    cudnn_benchmark: bool = False
    tf32: bool = False
    amp: Amp = "off"
    channels_last: bool = False
    compile: bool = False
    sync_free_logging: bool = False
    batching: Batching = "fixed"
    warmup_memory: bool = False
    checkpointing: bool = False
    # The input-pipeline ceiling: every batch is already on the device before timing starts.
    data_on_device: bool = False

    def changes(self) -> dict[str, object]:
        """The fields that differ from the naive baseline, by name."""
        base = RunConfig()
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) != getattr(base, f.name)
        }


@dataclass(frozen=True)
class BenchSettings:
    """How long and how often to measure, and a few knobs that tests turn down."""

    steps: int = 30
    warmup: int = 3
    repeat: int = 3
    # Rounds at most: configurations still inconclusive after `repeat` rounds get more, until
    # their intervals settle (torchpace.measure; None: exactly `repeat`).
    max_repeat: int | None = None
    seed: int = 0
    # torch.compile backend: "inductor" for real runs; tests use "eager" (no C++ toolchain, fast).
    compile_backend: str = "inductor"
    # Workers the `workers` technique uses; None picks from the cores this process may use.
    workers: int | None = None
    peers: bool = False
    ceiling: bool = True
    # Seconds for the whole measurement: configurations and rounds that would not fit are left
    # out and listed (torchpace.measure's budget); None measures everything.
    budget_s: float | None = None

    def __post_init__(self) -> None:
        check_window(self.warmup, self.steps)
        if self.repeat < 1:
            raise ValueError(f"repeat must be at least 1, got {self.repeat}")
        if self.budget_s is not None and self.budget_s <= 0:
            raise ValueError(f"budget must be positive, got {self.budget_s:g}")
        if self.max_repeat is not None and self.max_repeat < self.repeat:
            raise ValueError(
                f"max_repeat ({self.max_repeat}) must be at least repeat ({self.repeat})"
            )
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
