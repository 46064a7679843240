"""How `torchpace analyze` grows with the trace: the large fixture repeated 1, 2 and 4 times.

    python benchmarks/bench_analyze_scaling.py [--repeat 3] [--copies 1 2 4]

Each copy of the 216k-event V100 trace follows the previous one in time, with its step numbers,
correlation and External ids moved past the previous copy's (so kernels still link to their
launches), and is gzipped like the original. For each size the whole command runs in a fresh
process, as users run it and with `-j 1`; the report is the median wall time and the time per
event. Linear cost means a flat time per event (the fixed part, interpreter and imports,
shrinks in it as the trace grows).
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests/fixtures/traces/large/transformer_v100_rank1of2_memory.json.gz"
SMOKE_TRACE = ROOT / "tests/fixtures/traces/compare_pairs/cheap_1_worker.json.gz"
_IDS = ("External id", "correlation", "Ev Idx")


def _shifted(event: dict[str, Any], copy: int, dt: float, id_step: int, steps: int) -> dict:
    out = dict(event)
    if "ts" in out and isinstance(out["ts"], (int, float)):
        out["ts"] = out["ts"] + copy * dt
    if out.get("cat") == "ac2g" and isinstance(out.get("id"), int):
        out["id"] = out["id"] + copy * id_step
    name = out.get("name", "")
    if isinstance(name, str) and name.startswith("ProfilerStep#"):
        out["name"] = f"ProfilerStep#{int(name.split('#')[1]) + copy * steps}"
    args = out.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in _IDS:
            if isinstance(args.get(key), int):
                args[key] = args[key] + copy * id_step
        out["args"] = args
    return out


def repeated(doc: dict[str, Any], copies: int) -> dict[str, Any]:
    """The trace with its events repeated `copies` times, one after the other in time."""
    events = doc["traceEvents"]
    timed = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    dt = max(timed) - min(timed) + 1000.0
    ids = [
        v for e in events if isinstance(e.get("args"), dict)
        for k, v in e["args"].items() if k in _IDS and isinstance(v, int)
    ]  # fmt: skip
    id_step = max(ids) + 1
    steps = sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    out = dict(doc)
    out["traceEvents"] = [
        _shifted(e, c, dt, id_step, steps) if c else e for c in range(copies) for e in events
    ]
    return out


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    trace = TRACE
    if args.smoke:  # numbers from a smoke run mean nothing
        args.repeat, args.copies, trace = 1, [1, 2], SMOKE_TRACE
    doc = msgspec.json.decode(gzip.decompress(trace.read_bytes()))
    tmp = Path(tempfile.mkdtemp(prefix="scaling-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPYCACHEPREFIX": str(tmp / "pyc"), "PYTHONPATH": str(ROOT / "src")}
    print(f"{len(os.sched_getaffinity(0))} usable cores; load average {os.getloadavg()[0]:.1f}")
    for copies in args.copies:
        big = repeated(doc, copies)
        path = tmp / f"x{copies}.json.gz"
        path.write_bytes(gzip.compress(msgspec.json.encode(big), compresslevel=6))
        events = len(big["traceEvents"])
        cmd = [sys.executable, "-m", "torchpace", "analyze", str(path), "--format", "json"]
        timed(cmd, env)  # warms the byte-code cache
        for label, extra in (("all cores", []), ("-j 1", ["-j", "1"])):
            wall = statistics.median(timed([*cmd, *extra], env) for _ in range(args.repeat))
            print(
                f"x{copies}: {events:,} events, {path.stat().st_size / 1e6:.1f} MB gzip, "
                f"{label}: {wall:.3f} s, {wall / events * 1e6:.2f} us/event"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
