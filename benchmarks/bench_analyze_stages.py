"""What `torchpace analyze` cannot go below on one large file: its first stages, in fresh processes.

    python benchmarks/bench_analyze_stages.py [--trace FILE] [--repeat 11] [--baseline-src DIR]

Each line is a fresh process that stops after one more stage (the command's imports with every
rule, then reading and inflating the file, decoding it, normalising its events), beside the whole
command (`-j 1`) and the command running one rule that reads nothing of the trace (the breakdown
and the memory view still run). Medians of CPU time (user + system), system time and minor page
faults: a page faulted in is system time, and a 54 MB trace faults in ~190 MB. Runs alternate;
byte code is cached as in bench_analyze.py. Compare the stages with HTA's load there: whatever
the rules cost, the command cannot beat the sum of the stages before them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT / "tests/fixtures/traces/large/transformer_v100_rank1of2_memory.json.gz"
SMOKE_TRACE = ROOT / "tests/fixtures/traces/compare_pairs/cheap_1_worker.json.gz"
STAGES = ("imports", "read", "decode", "normalise")

# Stops after the stage named by argv[2]; os._exit, as the command ends, frees nothing.
UP_TO = """
import gc, os, pathlib, sys
from torchpace.cli.main import main  # the command's own imports
from torchpace.doctor.registry import check_choice
check_choice(None, None, None)  # imports every rule, as the command does
stage = ("imports", "read", "decode", "normalise").index(sys.argv[2])
if stage >= 1:
    from torchpace.trace.load import _decode
    from torchpace.trace.partial import normalise
    from torchpace.trace.read import read_trace_bytes
    gc.disable()  # as inside the command (torchpace.teardown)
    data = read_trace_bytes(pathlib.Path(sys.argv[1]))
if stage >= 2:
    header, events, notes = _decode("trace", data)
if stage >= 3:
    normalise(events, header, notes)
os._exit(0)
"""


def usage(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(CPU seconds, system seconds, minor page faults) of one child process."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:4])}... failed")
    return ru.ru_utime + ru.ru_stime, ru.ru_stime, ru.ru_minflt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument(
        "--baseline-src", type=Path, help="another checkout's src/: its command too"
    )
    parser.add_argument("--smoke", action="store_true", help="seconds: numbers mean nothing")
    args = parser.parse_args()
    if args.smoke:
        args.repeat, args.trace = 1, SMOKE_TRACE
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="pyc-")
    ours = base | {"PYTHONPATH": str(ROOT / "src")}
    analyze = [sys.executable, "-m", "torchpace", "analyze", str(args.trace), "--format", "json"]
    runs = {"whole command, -j 1": ([*analyze, "-j", "1"], ours)}
    if args.baseline_src:
        runs["baseline's, -j 1"] = (
            [*analyze, "-j", "1"],
            base | {"PYTHONPATH": str(args.baseline_src)},
        )
    runs["one rule (tf32-disabled)"] = ([*analyze, "-j", "1", "--only", "tf32-disabled"], ours)
    for stage in STAGES:
        runs[f"up to {stage}"] = ([sys.executable, "-c", UP_TO, str(args.trace), stage], ours)
    for cmd, env in runs.values():
        usage(cmd, env)  # untimed: warms the byte-code cache
    seen: dict[str, list[tuple[float, float, int]]] = {name: [] for name in runs}
    for _ in range(args.repeat):
        for name, (cmd, env) in runs.items():
            seen[name].append(usage(cmd, env))
    print(f"trace: {args.trace.name}; {args.repeat} runs; load average {os.getloadavg()[0]:.1f}")
    for name, rows in seen.items():
        cpu, sys_s, faults = (statistics.median(column) for column in zip(*rows, strict=True))
        print(f"{name:26s} CPU {cpu:.3f} s (least {min(r[0] for r in rows):.3f}), "
              f"system {sys_s:.3f} s, {faults:,.0f} page faults")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
