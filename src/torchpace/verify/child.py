"""One measured run of the user's script: `python -m torchpace.verify.child [-m] SCRIPT ARGS...`.

Started afresh by `doctor --verify` for every run of every arm (torchpace.measure.process): it
switches on the fixes named in TORCHPACE_VERIFY_FIXES (a JSON list; empty: the plain script),
runs the script under the doctor's runner without the profiler, times the steps of the window the
parent asked for (TORCHPACE_MEASURE_WARMUP/STEPS), stops the script after them and writes their
times to TORCHPACE_MEASURE_OUT. On failure its last stderr line says why; a fix that cannot be
applied to what the script does (appliers.base.refuse) ends the run with NOT_APPLICABLE and why.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from torchpace.verify.appliers import ENV_FIXES, apply
from torchpace.verify.appliers.base import NOT_APPLICABLE, refusal

# The exit status of a run whose fix was refused (any non-zero status fails the run's arm).
REFUSED = 3

# Steps are written as means over blocks of BLOCK steps: a loader with workers delivers batches in
# bursts (two workers and a fast model: a batch at once, then a wait for two), so single steps
# mislead a median while blocks of 4 hold whole cycles of 1, 2 or 4 workers.
BLOCK = 4


def blocks(step_ms: list[float], size: int = BLOCK) -> list[float]:
    """Means over consecutive blocks of `size` steps (the last, shorter block dropped unless it
    is the only one)."""
    whole = [step_ms[i : i + size] for i in range(0, len(step_ms) - size + 1, size)]
    return [sum(b) / len(b) for b in whole] or [sum(step_ms) / len(step_ms)]


def _target(argv: list[str]):  # type: ignore[no-untyped-def]
    from torchpace.runner.run import Target

    if argv and argv[0] == "-m":
        return Target(argv[1], tuple(argv[2:]), module=True)
    return Target(argv[0], tuple(argv[1:]))


def main(argv: list[str] | None = None) -> int:
    """Run the script once with the fixes on; 0 when the window's step times were written."""
    from torchpace.measure.process import window_from_env, write_steps
    from torchpace.runner.options import DoctorOptions
    from torchpace.runner.run import run_target

    args = sys.argv[1:] if argv is None else argv
    window = window_from_env()
    if not args or window is None:
        print("torchpace verify child: run by doctor --verify only", file=sys.stderr)
        return 2
    warmup, steps = window
    apply(json.loads(os.environ.get(ENV_FIXES, "[]")))
    with tempfile.TemporaryDirectory(prefix="torchpace-verify-") as tmp:
        options = DoctorOptions(
            out_dir=Path(tmp),
            warmup=warmup,
            steps=1,
            profile=False,  # unprofiled: the window's steps are timed only
            timed_steps=steps,
            watch_steps=0,  # no module hooks either
        )
        result = run_target(_target(args), options)
    why = refusal()  # even when the script caught the exception
    if why is not None:
        print(f"torchpace: {NOT_APPLICABLE}{why}", file=sys.stderr)
        return REFUSED
    timed = result.unprofiled_ms[-steps:] if result.stopped_early else ()
    if len(timed) < steps:
        ran = "failed" if result.exit_code else "ended"
        print(result.error, file=sys.stderr, end="")
        print(
            f"torchpace: the script {ran} (status {result.exit_code}) before the {warmup} "
            f"warm-up and {steps} timed steps ({result.step_note})",
            file=sys.stderr,
        )
        return result.exit_code or 1
    write_steps(blocks(list(timed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
