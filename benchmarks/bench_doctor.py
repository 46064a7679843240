"""The doctor's costs: hooks outside the profiled window, report latency, memory and trace size.

Run: PYTHONPATH=src python benchmarks/bench_doctor.py [--pairs 21 --steps 50 --reports 3]
     PYTHONPATH=src python benchmarks/bench_doctor.py --footprint [--before OLD/src]

1. Overhead outside the profiled window (target <= 1%): the same CPU training loop (DataLoader,
   small conv net, SGD: every hook the doctor installs fires each step), timed bare and with the
   doctor's session installed and past its profiled steps (as under `--full`), in interleaved
   blocks, in process CPU time with one intra-op thread (wall time on a shared machine mostly
   measures the other tenants); the figure is the median of the paired per-step ratios, plus the
   hooks' own cost per step measured in isolation.
2. Report latency (target <= 2 s): `torchpace doctor` in-process on a typical script
   (tests/doctor/scripts/conv_bias_bn.py: 5 warm-up + 10 profiled steps); seconds from the end of the
   last profiled step to the rendered report (trace export, loading, rules, rendering).
3. Footprint (`--footprint`; target: the doctor's peak memory at most 1.5x the plain run's, with
   its full window of 10 profiled steps, issue 26): each example run as `python SCRIPT`, under
   `torchpace doctor` from this tree, and, with `--before SRC`, under the doctor from another
   checkout's src/ (e.g. `git archive 8b0a47c | tar -x -C /tmp/f-before`), `--repeat` rounds, the
   runs of a round in a rotated order; peak RSS of the process tree's largest process (wait4),
   per run and the median of each round's doctor/plain ratio, and the trace's size on disk, event
   count and profiled steps. `--nanogpt DIR` adds karpathy/nanoGPT's baby GPT (a checkout with
   `data/shakespeare_char/prepare.py` run) on CPU: a real script of the same size as the small GPT.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import gzip
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from torchpace.checkup import doctor_diagnosis
from torchpace.report import render
from torchpace.runner.run import DoctorOptions, Target, run_target
from torchpace.runner.session import Session

# CPU time of the whole process, not wall time: on a shared machine wall time mostly measures the
# other tenants (the same block varies 10x), while CPU time measures the work this process did,
# the doctor's hooks included.
CLOCK = time.process_time
ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "tests" / "doctor" / "scripts" / "conv_bias_bn.py"
# The examples the footprint is measured on, with arguments that give the doctor its 5 warm-up,
# 10 profiled and 3 timed steps and then some.
FOOTPRINT = {
    "naive_train": [str(ROOT / "examples" / "naive_train.py"), "--epochs", "1", "--steps", "40"],
    "small GPT": [str(ROOT / "examples" / "gpt_train.py"), "--iters", "25"],
}
# nanoGPT's baby GPT (10.65M parameters) on CPU, run in its checkout: 20 iterations, one tiny eval.
NANOGPT = [
    "train.py",
    "config/train_shakespeare_char.py",
    "--device=cpu",
    "--compile=False",
    "--dtype=float32",
    "--max_iters=20",
    "--eval_interval=1000",
    "--eval_iters=2",
    "--log_interval=5",
    "--batch_size=4",
    "--always_save_checkpoint=False",
    "--wandb_log=False",
]


# The doctor as `torchpace doctor --out DIR SCRIPT ARGS` runs it (run, diagnose, render the text
# report), with the window's 60 s bound lifted: on a busy machine 10 profiled steps of the GPT take
# minutes, and the footprint asked for is that of a full window.
DOCTOR = """
import sys
from pathlib import Path
from torchpace.checkup import doctor_diagnosis
from torchpace.report import render
from torchpace.runner.profiling import ProfileBounds
from torchpace.runner.run import DoctorOptions, Target, run_target
options = DoctorOptions(out_dir=Path(sys.argv[1]), bounds=ProfileBounds(max_seconds=3600))
result = run_target(Target(sys.argv[2], tuple(sys.argv[3:])), options)
diagnosis = doctor_diagnosis([result], options)
print(render(diagnosis, "text") if diagnosis is not None else "no diagnosis")
"""


class _Workload:
    """A small conv net fed by a DataLoader: every hook the doctor installs fires each step."""

    def __init__(self, steps: int) -> None:
        torch.manual_seed(0)
        self.steps = steps
        self.model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(16 * 32 * 32, 10),
        )  # fmt: skip
        n = steps * 16
        self.data = TensorDataset(torch.randn(n, 3, 32, 32), torch.randint(0, 10, (n,)))

    def run(self) -> float:
        """Seconds per step. The optimizer is made here, so a doctor session installed first
        wraps its step() as it would in a user's script."""
        opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        gc.collect()  # a collection triggered by set-up garbage must not land in one block only
        start = CLOCK()
        for x, y in DataLoader(self.data, batch_size=16):
            loss = nn.functional.cross_entropy(self.model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return (CLOCK() - start) / self.steps


def _session_outside_window(out: Path) -> Session:
    """A session with its hooks installed, past its profiled steps (as in `doctor --full`)."""
    session = Session(DoctorOptions(out_dir=out, full=True, window_after_s=0))
    session.install()
    session.state.phase = "done"
    return session


def overhead(pairs: int, steps: int) -> tuple[float, float, float]:
    """(bare ms/step, doctored ms/step, median paired ratio) over interleaved blocks."""
    work = _Workload(steps)
    work.run()  # warm-up: first-touch allocations
    bare, hooked = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(pairs):
            session = _session_outside_window(Path(tmp))
            session.restore()  # install and restore once untimed, so both blocks start alike
            for doctored in (i % 2 == 0, i % 2 == 1):  # alternate which block runs first
                if not doctored:
                    bare.append(work.run())
                    continue
                session = _session_outside_window(Path(tmp))
                try:
                    hooked.append(work.run())
                finally:
                    session.restore()
    ratios = [h / b for h, b in zip(hooked, bare, strict=True)]
    return statistics.median(bare) * 1e3, statistics.median(hooked) * 1e3, statistics.median(ratios)


def hook_cost_us(calls: int = 20_000) -> float:
    """The hooks' own cost per step: the optimizer, __next__ and backward wrappers on no-op work."""
    with tempfile.TemporaryDirectory() as tmp:
        session = _session_outside_window(Path(tmp))
        try:
            p = torch.zeros(1, requires_grad=True)
            opt = torch.optim.SGD([p], lr=0.0)
            loader = DataLoader(range(calls), batch_size=None)
            t0 = CLOCK()
            for _ in loader:
                opt.step()
            hooked = CLOCK() - t0
        finally:
            session.restore()
    opt = torch.optim.SGD([p], lr=0.0)
    t0 = CLOCK()
    for _ in DataLoader(range(calls), batch_size=None):
        opt.step()
    return (hooked - (CLOCK() - t0)) / calls * 1e6


def report_latency(repeats: int, warmup: int = 5, steps: int = 10) -> list[float]:
    """Seconds from the last profiled step's end to the rendered report, per repeat."""
    out: list[float] = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            options = DoctorOptions(out_dir=Path(tmp), warmup=warmup, steps=steps)
            with contextlib.redirect_stdout(io.StringIO()):
                result = run_target(Target(str(SCRIPT)), options)
                diagnosis = doctor_diagnosis([result], options)
                assert diagnosis is not None and result.last_step_end is not None
                render(diagnosis, "text")
            out.append(time.perf_counter() - result.last_step_end)
    return out


@dataclass(frozen=True)
class Footprint:
    """One run of an example: its peak memory and the trace it left."""

    peak_mb: float
    trace_mb: float | None = None
    events: int | None = None
    steps: int | None = None  # ProfilerStep# spans in the trace


def _peak_mb(cmd: list[str], env: dict[str, str], cwd: Path | None) -> float:
    """Peak RSS of the largest process of the run (wait4: the process and what it waited for)."""
    out = subprocess.DEVNULL
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=out)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd} failed")
    return usage.ru_maxrss / 1024


def _trace(folder: Path) -> tuple[float, int, int]:
    (path,) = [p for p in folder.iterdir() if ".pt.trace.json" in p.name]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        events = json.load(f)["traceEvents"]
    steps = sum(str(e.get("name", "")).startswith("ProfilerStep#") for e in events)
    return path.stat().st_size / 1e6, len(events), steps


def footprint(args: list[str], src: Path | None, cwd: Path | None = None) -> Footprint:
    """Run an example plainly (src None) or under the doctor from the src/ folder given."""
    env = dict(os.environ)
    if src is None:
        return Footprint(_peak_mb([sys.executable, *args], env, cwd))
    env["PYTHONPATH"] = str(src)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-c", DOCTOR, tmp, *args]
        peak = _peak_mb(cmd, env, cwd)
        return Footprint(peak, *_trace(Path(tmp)))


def print_footprint(before: Path | None, repeat: int, nanogpt: Path | None) -> None:
    """Per example: each run's peak, then the median over rounds of doctor/plain in a round."""
    runs: dict[str, Path | None] = {"plain python": None}
    runs.update({"doctor before": before} if before else {})
    runs["doctor now"] = ROOT / "src"
    examples: dict[str, tuple[list[str], Path | None]] = {
        n: (a, None) for n, a in FOOTPRINT.items()
    }
    if nanogpt is not None:
        examples["nanoGPT"] = (NANOGPT, nanogpt)
    print("example      | run            | peak RSS | x plain | trace on disk | events | steps")
    for name, (args, cwd) in examples.items():
        ratios: dict[str, list[float]] = {label: [] for label in runs}
        for r in range(repeat):
            labels = list(runs)
            labels = labels[r % len(labels) :] + labels[: r % len(labels)]  # rotate the order
            done = {label: footprint(args, runs[label], cwd) for label in labels}
            plain = done["plain python"].peak_mb
            for label, f in done.items():
                ratios[label].append(f.peak_mb / plain)
                trace = f"{f.trace_mb:9.1f} MB" if f.trace_mb is not None else "            -"
                events = f"{f.events:,}" if f.events is not None else "-"
                print(
                    f"{name:12s} | {label:14s} | {f.peak_mb:5.0f} MB | {f.peak_mb / plain:6.2f}x"
                    f" | {trace} | {events} | {f.steps if f.steps is not None else '-'}"
                )
        for label, xs in ratios.items():
            if label != "plain python":
                print(
                    f"{name}, {label}: median {statistics.median(xs):.2f}x plain over "
                    f"{len(xs)} rounds ({min(xs):.2f}-{max(xs):.2f}x)"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=21, help="bare/doctored block pairs")
    parser.add_argument("--steps", type=int, default=30, help="steps per block")
    parser.add_argument("--reports", type=int, default=3, help="doctor runs for the latency")
    parser.add_argument("--footprint", action="store_true", help="memory and trace size only")
    parser.add_argument("--before", type=Path, help="another checkout's src/ to compare with")
    parser.add_argument("--repeat", type=int, default=3, help="footprint rounds per example")
    parser.add_argument("--nanogpt", type=Path, help="a nanoGPT checkout to add to the footprint")
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    if args.smoke:  # numbers from a smoke run mean nothing
        args.pairs, args.steps, args.reports = 2, 3, 1
    print(f"torch {torch.__version__}, CPU")
    if args.footprint:
        print_footprint(args.before, args.repeat, args.nanogpt)
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one intra-op thread: CPU time then tracks the step closely
    print("overhead measured in process CPU time, 1 thread")
    bare, hooked, ratio = overhead(args.pairs, args.steps)
    cost = hook_cost_us(2_000 if args.smoke else 20_000)
    torch.set_num_threads(threads)
    print(
        f"outside the profiled window: bare {bare:.3f} ms/step, doctored {hooked:.3f} ms/step, "
        f"median ratio {ratio:.4f} ({(ratio - 1) * 100:+.2f}%; target <= +1%)"
    )
    print(f"hooks' own cost: {cost:.2f} us per step ({cost / (bare * 1e3) * 100:.3f}% of a step)")
    latency = report_latency(args.reports, *((1, 2) if args.smoke else (5, 10)))
    print(
        f"report ready after the last profiled step: median {statistics.median(latency):.2f} s, "
        f"max {max(latency):.2f} s over {len(latency)} runs (target <= 2 s)"
    )


if __name__ == "__main__":
    main()
