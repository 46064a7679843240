"""Time `torchpace analyze` on the largest trace against Holistic Trace Analysis loading it.

    python benchmarks/bench_analyze.py [--trace FILE] [--repeat 5] [--baseline-src DIR]

Side by side in one run (the machine is shared: compare ratios, not absolute times):
- ours: the whole command in a fresh process, `python -m torchpace analyze FILE --format json`,
  as users run it (decoding on every usable core), and with `-j 1` (one process). Wall time,
  CPU time of the command and its decoding workers, and the peak RSS of the largest of them.
- memory: one more, untimed run of each of ours, sampled every 5 ms: the peak of the summed
  proportional set size (PSS) of the command and its workers (pages they share count once).
- HTA: `TraceAnalysis(trace_dir=...)` from the `traceinsight` package, in its own venv
  (benchmarks/.venv-hta: `python3 -m venv benchmarks/.venv-hta &&
  benchmarks/.venv-hta/bin/pip install traceinsight`); its load time is measured inside the
  process, after imports, which favours HTA; its whole process is reported too.
- Byte code: this machine sets PYTHONDONTWRITEBYTECODE, so a source checkout would recompile
  every torchpace module on each run (~50 ms) where an installed package has its .pyc (HTA's venv
  does). Every child gets a private PYTHONPYCACHEPREFIX (warmed by a first untimed run).
Runs alternate (ours, ours -j 1, HTA, ours, ...) and the medians of `--repeat` runs are reported.
"""

from __future__ import annotations

import argparse
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
SMOKE_TRACE = ROOT / "tests/fixtures/traces/compare_pairs/cheap_1_worker.json.gz"

HTA_LOAD = """
import sys, time, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t0, c0 = time.perf_counter(), time.process_time()
TraceAnalysis(trace_dir=sys.argv[1])
print(time.perf_counter() - t0, time.process_time() - c0)
"""


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak RSS MB, stdout) of one child process.

    wait4 gives the child's usage with that of the workers it reaped: CPU time summed, peak
    RSS the largest of them.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:4])}... failed ({code}): {stderr[-500:]}")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, stdout  # ru_maxrss is in KiB on Linux


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass  # it just ended
    return 0


def family_pss_kib(pid: int) -> int:
    """The summed PSS of a process and its children now (KiB; 0 for one that just ended)."""
    return sum(_pss_kib(p) for p in _family(pid))


def _family(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return [pid]
    return [pid, *(int(c) for c in children)]


def peak_pss_mb(cmd: list[str], env: dict[str, str]) -> float:
    """The peak summed PSS of a command and its children, sampled every 5 ms (MB)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, family_pss_kib(proc.pid))
        time.sleep(0.005)
    return peak / 1024


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def _line(name: str, m: dict[str, list[float]], pss: float) -> str:
    runs = ", ".join(f"{x:.2f}" for x in m["wall"])
    return (
        f"{name}: median {_med(m['wall']):.3f} s wall ({runs}), {_med(m['cpu']):.3f} s CPU, "
        f"peak RSS {_med(m['rss']):.0f} MB (largest process), all processes {pss:.0f} MB PSS"
    )


def report(
    args: argparse.Namespace,
    ours: dict[str, dict[str, list[float]]],
    pss: dict[str, float],
    hta: dict[str, list[float]] | None,
) -> None:
    """Print the medians and the ratios."""
    size = args.trace.stat().st_size / 1e6
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"trace: {args.trace.name} ({size:.1f} MB gzip); {args.repeat} runs; load average {load}")
    print(f"cores usable: {len(os.sched_getaffinity(0))}")
    for name in ours:
        print(_line(name, ours[name], pss[name]))
    if hta is None:
        print(f"HTA: {args.hta_python} not found; create benchmarks/.venv-hta (see the docstring)")
        return
    print(
        f"HTA TraceAnalysis load: median {_med(hta['load']):.3f} s wall, "
        f"{_med(hta['load_cpu']):.3f} s CPU (whole process {_med(hta['wall']):.3f} s wall, "
        f"{_med(hta['cpu']):.3f} s CPU, peak RSS {_med(hta['rss']):.0f} MB)"
    )
    for name, m in ours.items():
        print(
            f"ratio, HTA load / {name}: {_med(hta['load']) / _med(m['wall']):.1f}x wall "
            f"({_med(hta['wall']) / _med(m['wall']):.1f}x against HTA's whole process), "
            f"{_med(hta['load_cpu']) / _med(m['cpu']):.1f}x CPU"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hta-python", type=Path, default=HTA_PYTHON)
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="another checkout's src/ (e.g. main's), timed alternately with this one's",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    if args.smoke:  # numbers from a smoke run mean nothing
        args.repeat, args.trace = 1, SMOKE_TRACE
    cache = {"PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="pyc-")}
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | cache
    env = base | {"PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    analyze = [sys.executable, "-m", "torchpace", "analyze", str(args.trace), "--format", "json"]
    commands = {"ours": (analyze, env), "ours -j 1": ([*analyze, "-j", "1"], env)}
    if args.baseline_src:  # another checkout's sources, run alternately with these
        other = base | {"PYTHONPATH": str(args.baseline_src)}
        commands |= {"baseline": (analyze, other), "baseline -j 1": ([*analyze, "-j", "1"], other)}
    hta_dir = Path(tempfile.mkdtemp(prefix="hta-"))
    (hta_dir / args.trace.name).symlink_to(args.trace.resolve())
    have_hta = args.hta_python.exists()
    hta_cmd = [str(args.hta_python), "-c", HTA_LOAD, str(hta_dir)]
    for cmd, cmd_env in commands.values():
        run(cmd, cmd_env)  # untimed: warms the byte-code cache
    if have_hta:
        run(hta_cmd, base)
    ours = {name: {"wall": [], "cpu": [], "rss": []} for name in commands}
    hta: dict[str, list[float]] = {"load": [], "load_cpu": [], "wall": [], "cpu": [], "rss": []}
    for _ in range(args.repeat):
        for name, (cmd, cmd_env) in commands.items():
            wall, cpu, peak, _out = run(cmd, cmd_env)
            ours[name]["wall"].append(wall)
            ours[name]["cpu"].append(cpu)
            ours[name]["rss"].append(peak)
        if have_hta:
            wall, cpu, peak, out = run(hta_cmd, base)
            load, load_cpu = (float(x) for x in out.strip().splitlines()[-1].split())
            for key, value in zip(hta, (load, load_cpu, wall, cpu, peak), strict=True):
                hta[key].append(value)
    pss = {name: peak_pss_mb(cmd, cmd_env) for name, (cmd, cmd_env) in commands.items()}
    report(args, ours, pss, hta if have_hta else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
