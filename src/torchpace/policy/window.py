"""The step window every measurement takes: warm-up steps skipped, then steps measured. One
check for the doctor's flags, `--verify`, the bench, the measurement core and the callbacks."""

from __future__ import annotations


def check_window(warmup: int, steps: int, *, prefix: str = "") -> None:
    """ValueError unless `warmup` is 0 or more and `steps` 1 or more (`prefix`: "--" for flags)."""
    if warmup < 0:
        raise ValueError(f"{prefix}warmup must be 0 or more; got {warmup}")
    if steps < 1:
        raise ValueError(f"{prefix}steps must be 1 or more; got {steps}")
