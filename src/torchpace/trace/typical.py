"""Which steps are typical: the one rule behind every median of step time (reports, `compare`,
`bench` and `doctor --verify`; docs/measure.md).

A step is set apart, with its reason, when it is longer than OUTLIER_FACTOR x the median step for
a reason other than waiting for its own batch:
- it fetched more batches than the typical step: a validation loader ran inside it (evaluation);
- it is long without waiting for data: checkpointing, evaluation on tensors, a recompilation.
A loader that cannot keep up stalls again and again, and those stalls are the loop's steady state:
a step that waits for its one batch stays typical. Warm-up steps are set apart before this rule
(trace/warmup.py) and are not in the samples it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torchpace.trace.stats import median

OUTLIER_FACTOR = 2.0
MIN_SAMPLES = 3  # fewer steps than this have no median to stand out from


@dataclass(frozen=True)
class Sample:
    """One step as the rule sees it; what is unknown (plain timings) is None."""

    ms: float
    wait_ms: float | None = None  # time the step waited for its batch
    batches: int | None = None  # batches the step fetched


def set_apart(samples: Sequence[Sample]) -> list[str]:
    """Per sample, why it is not a typical step; "" for a typical one."""
    if len(samples) < MIN_SAMPLES:
        return [""] * len(samples)
    typical_ms = median(s.ms for s in samples)
    counts = [s.batches for s in samples if s.batches is not None]
    usual = median(counts) if counts else None
    return [_why(s, typical_ms, usual) for s in samples]


def _why(s: Sample, typical_ms: float, usual_batches: float | None) -> str:
    if typical_ms <= 0 or s.ms <= OUTLIER_FACTOR * typical_ms:
        return ""
    times = f"{s.ms / typical_ms:.1f}x the median step"
    if s.batches is not None and usual_batches is not None and s.batches > usual_batches:
        return (
            f"{times}, {s.batches} batches fetched where a typical step fetches "
            f"{usual_batches:g} (evaluation?)"
        )
    if s.wait_ms is not None and s.wait_ms >= 0.5 * (s.ms - typical_ms):
        return ""  # it waited for its batch: a stall of the loop's steady state
    return f"{times} (checkpointing or evaluation?)"


def typical(values: Sequence[float]) -> tuple[list[float], list[tuple[int, str]]]:
    """Plain per-step times: the typical ones, and (position, why) for each one set apart."""
    why = set_apart([Sample(v) for v in values])
    kept = [v for v, w in zip(values, why, strict=True) if not w]
    return kept, [(i, w) for i, w in enumerate(why) if w]
