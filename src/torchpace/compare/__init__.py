"""`torchpace compare BEFORE AFTER`: what changed between two runs, with verdicts.

    from torchpace.compare import compare_paths
    c = compare_paths("before.json.gz", "after.json.gz")   # traces, folders of ranks or JSON reports
    c.headline()        # "AFTER is 4.85x faster: 81.4 -> 16.8 ms per step (...)"

Per-phase step time, kernel and operator time (largest change first) and findings resolved / new /
changed, each change with a 95% interval and "no measurable change" inside the noise. Reporters
live in torchpace.report.compare.
"""

from __future__ import annotations

from torchpace.compare.diff import Comparison, FindingChange, Findings, NamedChange, compare
from torchpace.compare.sides import FindingRef, Side, load_side


def compare_paths(before: str, after: str, *, top: int = 10) -> Comparison:
    """Load both sides (trace, folder of ranks or JSON report) and compare them."""
    return compare(load_side(before), load_side(after), top=top)


__all__ = [
    "Comparison",
    "FindingChange",
    "FindingRef",
    "Findings",
    "NamedChange",
    "Side",
    "compare",
    "compare_paths",
    "load_side",
]
