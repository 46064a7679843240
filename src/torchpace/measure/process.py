"""Arms that are separate processes: a command started afresh for every run.

`torchpace doctor --verify` measures a fix on a fresh run of the user's script. The child learns
its window from the environment and writes its per-step times to a file; `command_arm` turns that
into an Arm the core can interleave like any other:

    TORCHPACE_MEASURE_WARMUP, TORCHPACE_MEASURE_STEPS   the window (steps after the warm-up)
    TORCHPACE_MEASURE_OUT                                where to write {"step_ms": [...]}

A child that times its own loop calls `write_steps()`; the doctor's runner does it for a script
that knows nothing of torchpace.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from torchpace.measure.arms import Arm, Expect, Timed, Window

ENV_WARMUP = "TORCHPACE_MEASURE_WARMUP"
ENV_STEPS = "TORCHPACE_MEASURE_STEPS"
ENV_OUT = "TORCHPACE_MEASURE_OUT"


class ChildFailed(RuntimeError):
    """The measured command exited with an error or wrote no step times."""


def window_from_env(environ: Mapping[str, str] | None = None) -> tuple[int, int] | None:
    """(warmup, steps) as the parent asked, or None when not run by a measurement."""
    env = os.environ if environ is None else environ
    if ENV_OUT not in env:
        return None
    return int(env.get(ENV_WARMUP, "0")), int(env.get(ENV_STEPS, "1"))


def write_steps(step_ms: Sequence[float], path: str | None = None) -> None:
    """Write measured step times where the parent reads them (TORCHPACE_MEASURE_OUT)."""
    target = path or os.environ.get(ENV_OUT)
    if not target:
        raise ValueError(f"no output file: set {ENV_OUT} or pass path")
    Path(target).write_text(json.dumps({"step_ms": [float(x) for x in step_ms]}), encoding="utf-8")


def read_steps(path: Path) -> Timed:
    """What a child wrote; ChildFailed when it wrote nothing usable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        steps = tuple(float(x) for x in data["step_ms"])
        return Timed(steps)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ChildFailed(f"the command wrote no step times to {path} ({exc})") from None


def command_arm(
    name: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    expect: Expect | None = None,
) -> Arm:
    """An arm that runs `argv` once per run with the window in its environment.

    Args:
        env: variables added to this process's environment (how a fix is switched on).
        timeout_s: a run longer than this fails the arm (the baseline: the measurement).
    """

    def run(window: Window) -> Timed:
        with tempfile.TemporaryDirectory(prefix="torchpace-measure-") as tmp:
            out = Path(tmp) / "steps.json"
            child_env = {**os.environ, **(env or {})}
            child_env.update(
                {ENV_WARMUP: str(window.warmup), ENV_STEPS: str(window.steps), ENV_OUT: str(out)}
            )
            done = subprocess.run(
                list(argv), env=child_env, timeout=timeout_s, capture_output=True, text=True
            )
            if done.returncode != 0:
                tail = (done.stderr.strip().splitlines() or [""])[-1]
                raise ChildFailed(f"{argv[0]} exited with status {done.returncode}: {tail}")
            return read_steps(out)

    return Arm(name, run, expect or Expect())
