"""One technique per module; ORDER is also the order in which the cumulative recipe stacks them."""

from __future__ import annotations

from torchpace.bench.technique import Technique
from torchpace.bench.techniques import (
    amp_bf16,
    amp_fp16,
    bucketing,
    channels_last,
    checkpointing,
    compile,
    cudnn_benchmark,
    memory_warmup,
    persistent_workers,
    pin_memory,
    prefetcher,
    sync_free_logging,
    tf32,
    token_budget,
    workers,
)
from torchpace.errors import UsageError

# Input pipeline first, then math, then compilation last (it compiles whatever came before).
ORDER: tuple[Technique, ...] = (
    workers.TECHNIQUE,
    persistent_workers.TECHNIQUE,
    pin_memory.TECHNIQUE,
    prefetcher.TECHNIQUE,
    sync_free_logging.TECHNIQUE,
    bucketing.TECHNIQUE,
    token_budget.TECHNIQUE,
    cudnn_benchmark.TECHNIQUE,
    tf32.TECHNIQUE,
    channels_last.TECHNIQUE,
    amp_bf16.TECHNIQUE,
    amp_fp16.TECHNIQUE,
    memory_warmup.TECHNIQUE,
    compile.TECHNIQUE,
    checkpointing.TECHNIQUE,
)


def all_techniques() -> tuple[Technique, ...]:
    """Every technique, in recipe order."""
    return ORDER


def get_technique(name: str) -> Technique:
    """A technique by its kebab-case name."""
    for technique in ORDER:
        if technique.name == name:
            return technique
    known = ", ".join(t.name for t in ORDER)
    raise UsageError(f"unknown technique {name!r}; known techniques: {known}")


__all__ = ["ORDER", "Technique", "all_techniques", "get_technique"]
