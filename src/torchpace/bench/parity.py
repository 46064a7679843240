"""Loss parity: does a configuration compute the baseline's math (same seed, same data order)?"""

from __future__ import annotations

import math
from collections.abc import Sequence

from torchpace.bench.results import Parity
from torchpace.bench.technique import SAME_MATH_RTOL, Technique


def compare(
    baseline: Sequence[float], losses: Sequence[float], techniques: Sequence[Technique]
) -> Parity:
    """Largest relative per-step loss difference against the baseline, judged by the techniques' tolerance."""
    rtol = max([SAME_MATH_RTOL, *(t.parity_rtol for t in techniques)])
    apart = [t.numerics or t.name for t in techniques if not t.comparable]
    if apart:
        return Parity("not-comparable", None, rtol, "; ".join(apart))
    # Only the techniques that change numerics explain a difference; rounding-only ones do not.
    note = "; ".join(t.numerics or t.name for t in techniques if t.parity_rtol > SAME_MATH_RTOL)
    if not all(math.isfinite(x) for x in losses):
        return Parity("differs", None, rtol, "non-finite loss")
    n = min(len(baseline), len(losses))
    if n == 0:
        return Parity("not-comparable", None, rtol, "no losses recorded")
    diff = max(
        abs(a - b) / max(abs(b), 1e-8) for a, b in zip(losses[:n], baseline[:n], strict=True)
    )
    return _judge(diff, rtol, note)


def _judge(diff: float, rtol: float, note: str) -> Parity:
    """The verdict on the largest relative difference, against the tolerance."""
    # A technique that changes numerics (AMP, TF32) is never called "same math", however close.
    if diff <= SAME_MATH_RTOL and rtol <= SAME_MATH_RTOL:
        return Parity("same", diff, rtol)
    if diff <= rtol:
        return Parity("within-tolerance", diff, rtol, note)
    return Parity("differs", diff, rtol, note or "expected the same math")
