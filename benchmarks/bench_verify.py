"""`torchpace doctor --verify` on examples/naive_train.py: each fix's measured speedup, all safe
fixes together, and how long the whole verification took.

    python benchmarks/bench_verify.py [--budget 180] [-- extra script args]

Runs the doctor as a user would (a subprocess, JSON report) and prints, per finding, the status
(measured, no gain here, failed, not measured, needs a code change), the speedup with its 95%
interval and the plain and fixed step times; then the combined arm, the machine's load and the
wall time of the doctor's run with verification.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "naive_train.py"
SMOKE_SCRIPT = ROOT / "tests" / "verify" / "scripts" / "debug_eval.py"


def _arm(a: dict) -> str:  # type: ignore[type-arg]
    if a["verdict"] == "inconclusive":  # no ratio: its interval says nothing
        return f"inconclusive ({a['runs_count']} runs)"
    low, high = a["speedup_interval_ratio"]
    plain, fixed = a["baseline_step_ms"], a["fixed_step_ms"]
    return (
        f"{a['speedup_ratio']:.2f}x [{low:.2f}-{high:.2f}] {a['verdict']} "
        f"(plain {plain:.1f} ms -> {fixed:.1f} ms, {a['runs_count']} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=180.0)
    parser.add_argument("script_args", nargs="*", default=["--epochs", "1"])
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    flags: list[str] = []
    script = EXAMPLE
    if args.smoke:  # numbers from a smoke run mean nothing: a tiny script, the plain runs only
        script, args.script_args, args.budget = SMOKE_SCRIPT, ["--steps", "40"], 1.0
        flags = ["--warmup", "1", "--steps", "2"]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "torchpace", "doctor", *flags, "--verify",
                   "--verify-budget", str(args.budget), "--out", tmp, "-o", str(report),
                   str(script), *args.script_args]  # fmt: skip
        started = time.monotonic()
        subprocess.run(command, check=False, capture_output=True)
        took = time.monotonic() - started
        doc = json.loads(report.read_text())
    v = doc["verification"]
    print(f"doctor --verify {script.name}: {took:.0f} s in all (verification {v['total_s']:.0f} s "
          f"of a {v['budget_s']:.0f} s budget); {v['machine_load']}")  # fmt: skip
    if v["load_warning"]:
        print(f"  WARNING: {v['load_warning']}")
    if v["baseline_step_ms"] and v["profiled_step_ms"]:
        print(f"  plain script unprofiled {v['baseline_step_ms']:.1f} ms per step, profiled "
              f"{v['profiled_step_ms']:.1f} ms ({v['profiler_inflation_ratio']:.2f}x)")  # fmt: skip
    else:
        print("  plain script not measured (see the notes)")
    for f in doc["findings"]:
        m = f["measured"] or {}
        shown = _arm(m["best"]) if m.get("best") else m.get("note", "")
        print(f"  {f['rule']:<20} {m.get('status', '-'):<10} {m.get('fix', '')}: {shown}")
    if v["combined"]:
        print(f"  all safe fixes ({', '.join(v['combined_fixes'])}): {_arm(v['combined'])}")
    for note in v["notes"]:
        print(f"  note: {note}")


if __name__ == "__main__":
    main()
