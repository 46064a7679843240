"""The step window every measurement takes: warm-up steps skipped, then steps measured. One
check for the doctor's flags, `--verify`, the bench, the measurement core and the callbacks."""

from __future__ import annotations

# The fewest profiled steps whose step times a report judges (checkup withholds step-time verdicts
# below it), and so the fewest a profiled window holds unless the machine is near its memory limit.
MIN_STEPS = 3


def check_window(warmup: int, steps: int, *, prefix: str = "") -> None:
    """ValueError unless `warmup` is 0 or more and `steps` 1 or more (`prefix`: "--" for flags)."""
    if warmup < 0:
        raise ValueError(f"{prefix}warmup must be 0 or more; got {warmup}")
    if steps < 1:
        raise ValueError(f"{prefix}steps must be 1 or more; got {steps}")
