"""How `torchpace analyze` grows with the trace, and with the ranks of a folder.

    python benchmarks/bench_analyze_scaling.py [--repeat 3] [--copies 1 2 4]
    python benchmarks/bench_analyze_scaling.py --ranks 16 64 128 [--jobs 0 1] [--rank-trace F]

Ranks (`--ranks`): a folder of N ranks made from one real rank trace (HTA's
negative_queue_length_values_check/rank0.json.gz: an A100 TorchRec rank, 109k events, 25.8 MB of
JSON; in tests/fixtures/holdout), each file the same events under its own rank and world size
(distributedInfo), gzipped. `torchpace analyze FOLDER --format json` runs once per size and
`--jobs` value; reported: wall time, CPU time of the command and its workers, time per rank,
and the peak of the summed proportional set size (PSS) of the command and its workers, sampled
every 10 ms (pages they share count once). Linear time means a flat s/rank; memory that does
not grow with the ranks means it depends on the workers, not on the folder.

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
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import msgspec
from bench_analyze import family_pss_kib  # benchmarks/ is on the path: run as a script

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests/fixtures/traces/large/transformer_v100_rank1of2_memory.json.gz"
SMOKE_TRACE = ROOT / "tests/fixtures/traces/compare_pairs/cheap_1_worker.json.gz"
_IDS = ("External id", "correlation", "Ev Idx")
RANK_TRACE = ROOT / "tests/fixtures/holdout/hta_a100_torchrec_rank0of16.json.gz"
SMOKE_RANK_TRACE = ROOT / "tests/fixtures/traces/ddp_gloo_2rank/balanced/rank0.pt.trace.json.gz"
_RANK = re.compile(rb'"rank"\s*:\s*\d+')
_WORLD = re.compile(rb'"world_size"\s*:\s*\d+')


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


def rank_folder(trace: Path, ranks: int, out: Path) -> None:
    """`ranks` gzip files in `out`, each the events of `trace` under its own rank and world size
    (its distributedInfo's; the trace must have one).

    The events after the header are deflated once and shared: each file is its own header
    (deflated, flushed to a byte boundary) followed by them, one gzip member with its CRC.
    """
    data = gzip.decompress(trace.read_bytes())
    at = data.find(b'"distributedInfo"')
    cut = max(_RANK.search(data, at).end(), _WORLD.search(data, at).end())  # type: ignore[union-attr]
    tail = data[cut:]
    body = zlib.compressobj(6, zlib.DEFLATED, -15)
    packed_tail = body.compress(tail) + body.flush()
    out.mkdir(parents=True)
    for rank in range(ranks):
        info = _WORLD.sub(f'"world_size": {ranks}'.encode(), data[at:cut])
        head = data[:at] + _RANK.sub(f'"rank": {rank}'.encode(), info)
        start = zlib.compressobj(6, zlib.DEFLATED, -15)
        packed_head = start.compress(head) + start.flush(zlib.Z_FULL_FLUSH)
        crc = zlib.crc32(tail, zlib.crc32(head))
        size = (len(head) + len(tail)) & 0xFFFFFFFF
        gz = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + packed_head + packed_tail
        (out / f"rank{rank}.json.gz").write_bytes(gz + struct.pack("<II", crc, size))


def measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, CPU s of the command and the workers it reaped, peak summed PSS MB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    peak = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, family_pss_kib(proc.pid))
        time.sleep(0.01)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed")
    return wall, usage.ru_utime + usage.ru_stime, peak / 1024


def by_ranks(args: argparse.Namespace, env: dict[str, str], tmp: Path) -> None:
    """The --ranks mode: one folder per size, analysed with each --jobs value."""
    print(f"rank trace: {args.rank_trace.name}")
    for ranks in args.ranks:
        folder = tmp / f"ranks{ranks}"
        rank_folder(args.rank_trace, ranks, folder)
        size = sum(f.stat().st_size for f in folder.iterdir()) / 1e6
        for jobs in args.jobs:
            cmd = [sys.executable, "-m", "torchpace", "analyze", str(folder), "--format", "json"]
            cmd += ["-j", str(jobs)]
            load = os.getloadavg()[0]
            wall, cpu, pss = measured(cmd, env)
            print(
                f"{ranks} ranks ({size:.1f} MB gzip), -j {jobs}: {wall:.1f} s wall, "
                f"{cpu:.1f} s CPU, {wall / ranks:.3f} s/rank wall, {cpu / ranks:.3f} s/rank CPU, "
                f"peak PSS {pss:.0f} MB (all processes); load average {load:.1f} before",
                flush=True,
            )
        shutil.rmtree(folder)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--ranks", type=int, nargs="+", help="rank folders of these sizes")
    parser.add_argument("--jobs", type=int, nargs="+", default=[0], help="-j values (--ranks)")
    parser.add_argument("--rank-trace", type=Path, default=RANK_TRACE)
    parser.add_argument(
        "--src", type=Path, default=ROOT / "src", help="the torchpace sources to run (a baseline)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    trace = TRACE
    if args.smoke:  # numbers from a smoke run mean nothing
        args.repeat, args.copies, trace = 1, [1, 2], SMOKE_TRACE
        args.ranks, args.rank_trace = [2], SMOKE_RANK_TRACE
    tmp = Path(tempfile.mkdtemp(prefix="scaling-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPYCACHEPREFIX": str(tmp / "pyc"), "PYTHONPATH": str(args.src)}
    print(f"{len(os.sched_getaffinity(0))} usable cores; load average {os.getloadavg()[0]:.1f}")
    try:
        if args.ranks:
            by_ranks(args, env, tmp)
        if not args.ranks or args.smoke:
            by_copies(args, env, tmp, trace)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def by_copies(args: argparse.Namespace, env: dict[str, str], tmp: Path, trace: Path) -> None:
    """The --copies mode: the trace repeated, one file per size, analysed whole."""
    doc = msgspec.json.decode(gzip.decompress(trace.read_bytes()))
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


if __name__ == "__main__":
    raise SystemExit(main())
