"""Time `torchpace analyze` on the largest trace against Holistic Trace Analysis loading it.

    python benchmarks/bench_analyze.py [--trace FILE] [--repeat 5]

Side by side in one run (the machine is shared: compare ratios, not absolute times):
- ours: the whole command in a fresh process, `python -m torchpace analyze FILE --format json`
  (wall time and peak RSS of that process). Until the CLI's analyze lands it falls back to
  load_traces + diagnose + json.dumps in a fresh process, and says so.
- HTA: `TraceAnalysis(trace_dir=...)` from the `traceinsight` package, in its own venv
  (benchmarks/.venv-hta: `python3 -m venv benchmarks/.venv-hta &&
  benchmarks/.venv-hta/bin/pip install traceinsight`); its load time is measured inside the
  process, after imports, which favours HTA.
Runs alternate (ours, HTA, ours, ...) and the medians of `--repeat` runs are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT / "tests/fixtures/traces/large/transformer_v100_rank1of2_memory.json.gz"
HTA_PYTHON = ROOT / "benchmarks/.venv-hta/bin/python"

FALLBACK = """
import dataclasses, enum, json, sys
from torchpace.trace import load_traces
from torchpace.doctor.diagnose import diagnose

def plain(o):
    if isinstance(o, enum.Enum):
        return o.value
    if dataclasses.is_dataclass(o):
        return {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
    if isinstance(o, dict) or hasattr(o, "items"):
        return {str(plain(k)): v for k, v in o.items()}
    return str(o)

d = diagnose(load_traces(sys.argv[1]))
print(json.dumps(d, default=plain))
"""

HTA_LOAD = """
import sys, time, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t0, c0 = time.perf_counter(), time.process_time()
TraceAnalysis(trace_dir=sys.argv[1])
print(time.perf_counter() - t0, time.process_time() - c0)
"""


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak RSS MB, stdout) of one child process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        # wait4 reaps this child and returns its own rusage: its peak RSS, not the maximum
        # over every child so far (what getrusage(RUSAGE_CHILDREN) would give).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:4])}... failed ({proc.returncode}): {stderr[-500:]}")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, stdout  # ru_maxrss is in KiB on Linux


def ours_command(trace: Path, env: dict[str, str]) -> tuple[list[str], str]:
    """The real CLI when it is available, else the library fallback; and which one it is."""
    cli = [sys.executable, "-m", "torchpace", "analyze", str(trace), "--format", "json"]
    probe = subprocess.run(cli, capture_output=True, env=env)
    try:
        json.loads(probe.stdout)
        if probe.returncode in (0, 1):
            return cli, "python -m torchpace analyze FILE --format json"
    except ValueError:
        pass
    return [sys.executable, "-c", FALLBACK, str(trace)], (
        "fallback (CLI analyze not available yet): load_traces + diagnose + json.dumps "
        "in a fresh process"
    )


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def report(
    args: argparse.Namespace,
    what: str,
    ours: dict[str, list[float]],
    hta: dict[str, list[float]] | None,
) -> None:
    """Print the medians and the ratios."""
    size = args.trace.stat().st_size / 1e6
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"trace: {args.trace.name} ({size:.1f} MB gzip); {args.repeat} runs; load average {load}")
    print(f"ours measured: {what}")
    runs = ", ".join(f"{x:.2f}" for x in ours["wall"])
    print(
        f"ours: median {_med(ours['wall']):.3f} s wall ({runs}), {_med(ours['cpu']):.3f} s CPU, "
        f"peak RSS {_med(ours['rss']):.0f} MB"
    )
    if hta is None:
        print(f"HTA: {args.hta_python} not found; create benchmarks/.venv-hta (see the docstring)")
        return
    print(
        f"HTA TraceAnalysis load: median {_med(hta['load']):.3f} s wall, "
        f"{_med(hta['load_cpu']):.3f} s CPU (whole process {_med(hta['wall']):.3f} s, "
        f"peak RSS {_med(hta['rss']):.0f} MB)"
    )
    print(
        f"ratio HTA load / ours whole command: {_med(hta['load']) / _med(ours['wall']):.1f}x wall, "
        f"{_med(hta['load_cpu']) / _med(ours['cpu']):.1f}x CPU"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hta-python", type=Path, default=HTA_PYTHON)
    args = parser.parse_args()
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    cmd, what = ours_command(args.trace, env)
    hta_dir = Path(tempfile.mkdtemp(prefix="hta-"))
    (hta_dir / args.trace.name).symlink_to(args.trace.resolve())
    have_hta = args.hta_python.exists()
    ours: dict[str, list[float]] = {"wall": [], "cpu": [], "rss": []}
    hta: dict[str, list[float]] = {"load": [], "load_cpu": [], "wall": [], "rss": []}
    for _ in range(args.repeat):
        wall, cpu, peak, _out = run(cmd, env)
        ours["wall"].append(wall)
        ours["cpu"].append(cpu)
        ours["rss"].append(peak)
        if have_hta:
            hta_cmd = [str(args.hta_python), "-c", HTA_LOAD, str(hta_dir)]
            wall, _cpu, peak, out = run(hta_cmd, dict(os.environ))
            load, load_cpu = (float(x) for x in out.strip().splitlines()[-1].split())
            hta["load"].append(load)
            hta["load_cpu"].append(load_cpu)
            hta["wall"].append(wall)
            hta["rss"].append(peak)
    report(args, what, ours, hta if have_hta else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
