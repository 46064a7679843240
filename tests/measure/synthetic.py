"""Deterministic synthetic arms for the measurement core: a fake clock, seeded step times, no waiting.

A run's step times are `base_ms x factor x drift(t) x noise`: per-step log-normal jitter, a few
stalled steps (another process took the core), and a slow drift of the machine shared by every arm
(what interleaving must cancel). Nothing here sleeps or reads a real clock.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from torchpace.measure import Arm, Expect, Timed, Window


class FakeClock:
    """A clock that only moves when a run says how long it took."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def drift(t: float) -> float:
    """The machine slows by up to 15% and recovers over ~10 minutes (shared by every arm)."""
    return 1.0 + 0.075 * (1 - math.cos(2 * math.pi * t / 600.0))


def synthetic_arm(
    name: str,
    clock: FakeClock,
    *,
    factor: float = 1.0,
    base_ms: float = 20.0,
    jitter: float = 0.05,
    stalls: float = 0.05,
    seed: int = 0,
    expect: Expect | None = None,
) -> Arm:
    """An arm whose steps take base_ms x factor, with jitter, stalls and the shared drift."""
    rng = random.Random(f"{name}-{seed}")

    def run(window: Window) -> Timed:
        steps = []
        for _ in range(window.warmup + window.steps):
            ms = base_ms * factor * drift(clock.now) * math.exp(rng.gauss(0.0, jitter))
            if rng.random() < stalls:
                ms *= 3.0  # a step stalled by another process
            clock.advance(ms / 1000.0)
            steps.append(ms)
        return Timed(tuple(steps[window.warmup :]))

    return Arm(name, run, expect or Expect())


def failing_arm(name: str, clock: FakeClock) -> Arm:
    """An arm that raises, as a configuration that does not run on this machine would."""

    def run(window: Window) -> Timed:
        clock.advance(1.0)
        raise RuntimeError("this configuration cannot run here")

    return Arm(name, run)


def fixed_arm(name: str, clock: FakeClock, seconds: float, ms: float = 10.0) -> Arm:
    """An arm that takes `seconds` of fake time per run and measures `ms` per step."""

    def run(window: Window) -> Timed:
        clock.advance(seconds)
        return Timed((ms,) * window.steps)

    return Arm(name, run)


ArmFactory = Callable[..., Arm]
