"""The account of a followed run (`doctor --follow`): its wall time by phase, one row each.

Every renderer shows these rows at the top of the report; the phases partition the wall time
(runner/follow.py), so their shares add up to 100%.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchpace.runner.sensors.whole_run import RunAccount

LABELS = {
    "start-up": "start-up (process start to the first step)",
    "training": "training steps",
    "evaluation": "evaluation",
    "checkpoint": "checkpointing (torch.save)",
    "epoch-start": "epoch starts (iter(loader) to its first batch)",
    "gc": "garbage-collector pauses",
    "torchpace": "torchpace's own (profiler start, trace writing)",
    "unexplained": "unexplained (slow steps' excess over the median)",
    "tear-down": "tear-down (last step to the end)",
}
HEAD = ["phase", "time", "share", "count"]


def title(account: RunAccount) -> str:
    """The section's title: the whole run in one line."""
    return (
        f"Where the run's {seconds(account.wall_s)} went ({account.steps} steps, "
        f"{account.epochs} epoch(s); {account.ended})"
    )


def rows(account: RunAccount) -> list[list[str]]:
    """One row per phase that took any time: label, seconds, share of the wall, count."""
    wall = account.wall_s or 1.0
    return [
        [
            LABELS.get(p.name, p.name),
            seconds(p.seconds),
            f"{p.seconds / wall:.1%}",
            str(p.count) if p.count else "",
        ]
        for p in account.phases
        if p.seconds > 0 or p.name == "training"
    ]


def seconds(s: float) -> str:
    """Seconds as a person reads a run's length: 0.42 s, 12.3 s, 4 min 05 s."""
    if s < 10:
        return f"{s:.2f} s"
    if s < 120:
        return f"{s:.1f} s"
    return f"{int(s // 60)} min {int(s % 60):02d} s"


def document(account: RunAccount) -> dict[str, object]:
    """The account as JSON-ready data, units in the keys."""
    return {
        "wall_s": round(account.wall_s, 3),
        "steps": account.steps,
        "epochs": account.epochs,
        "ended": account.ended,
        "phases": [
            {"phase": p.name, "seconds": round(p.seconds, 3), "count": p.count}
            for p in account.phases
        ],
    }
