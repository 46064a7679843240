"""The account of a followed run (`doctor --follow`): its wall time by phase, one row each.

Every renderer shows these rows at the top of the report; the phases partition the wall time
(runner/follow.py), so their shares add up to 100%.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpace.report.units import run_length

if TYPE_CHECKING:
    from torchpace.runner.sensors.whole_run import RunAccount

LABELS = {
    "start-up": "start-up (process start to the first step)",
    "compile": "torch.compile compiling (dynamo and its backend)",
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
SLOW_HEAD = ["step", "time", "x median", "cause", "evidence"]


def title(account: RunAccount) -> str:
    """The section's title: the whole run in one line."""
    return (
        f"Where the run's {run_length(account.wall_s)} went ({account.steps} steps, "
        f"{account.epochs} epoch(s); {account.ended})"
    )


def rows(account: RunAccount) -> list[list[str]]:
    """One row per phase that took any time: label, seconds, share of the wall, count."""
    wall = account.wall_s or 1.0
    return [
        [
            LABELS.get(p.name, p.name),
            run_length(p.seconds),
            f"{p.seconds / wall:.1%}",
            str(p.count) if p.count else "",
        ]
        for p in account.phases
        if p.seconds > 0 or p.name == "training"
    ]


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
        "slow_steps_seen": account.slow_seen,
        "slow_steps": [
            {
                "step": s.step,
                "at_s": round(s.at_s, 3),
                "step_ms": round(s.ms, 1),
                "median_ms": round(s.median_ms, 2),
                "cause": s.cause,
                "evidence": s.evidence,
                "trace": s.trace,
            }
            for s in account.slow_steps
        ],
        "projection": _projection(account),
        "notes": list(account.notes),
    }


def _projection(account: RunAccount) -> dict[str, object] | None:
    p = account.projection
    if p is None:
        return None
    wall = round(p.wall_s, 1) if p.wall_s is not None else None
    return {"epoch_s": round(p.epoch_s, 3), "epochs": p.epochs, "wall_s": wall, "method": p.method}


def slow_title(account: RunAccount) -> str:
    """The slow steps' title ("" when none was slow)."""
    if not account.slow_seen:
        return ""
    kept = len(account.slow_steps)
    shown = "" if kept == account.slow_seen else f"; the {kept} slowest shown"
    return (
        f"Slow steps: {account.slow_seen} over 3x the running and the recent median{shown} "
        "(causes from the hooks, or from a profiled capture)"
    )


def slow_rows(account: RunAccount) -> list[list[str]]:
    """One row per slow step kept: its number, time, ratio to the median, cause, evidence."""
    return [
        [
            str(s.step),
            run_length(s.ms / 1000.0),
            f"{s.ms / s.median_ms:.1f}x" if s.median_ms > 0 else "",
            s.cause,
            "; ".join(x for x in (s.evidence, f"trace: {s.trace}" if s.trace else "") if x),
        ]
        for s in account.slow_steps
    ]


def projection_line(account: RunAccount) -> str:
    """The whole job's projected length for a run stopped early ("" when it ran to its end)."""
    p = account.projection
    if p is None:
        return ""
    if p.wall_s is None:
        return f"One epoch takes {run_length(p.epoch_s)} ({p.method})."
    return (
        f"Projected whole job: {run_length(p.wall_s)} for {p.epochs} epochs, one epoch "
        f"{run_length(p.epoch_s)} ({p.method})."
    )


def lines(account: RunAccount) -> list[str]:
    """What follows the tables: the projection and the notes."""
    return [x for x in (projection_line(account), *account.notes) if x]
