"""What `torchpace doctor --follow` costs a run: step time outside captures, and memory over time.

    python benchmarks/bench_follow.py [--repeat 9] [--steps 4000] [--long 200000] [--with-full]
                                      [--sizes ms,tiny] [--baseline OTHER/src] [--smoke]
    python benchmarks/bench_follow.py --count [--with-full] [--baseline OTHER/src]

Overhead: one small training script (an MLP fed by a DataLoader, one thread) times its own steps
with time.perf_counter() and time.thread_time(); run as `python script.py` and as `torchpace
doctor --follow script.py` (with --with-full also as `torchpace doctor --full script.py`: the
doctor's hooks, no --follow), `--repeat` rounds, each round one run of each mode back to back,
the order reversed every other round (`--baseline`: the doctor's modes also run from another
checkout's src/, in the same rounds, so a change is measured side by side). Per run: the median step over the steps after the first
300 (the doctor's warm-up, profiled and timed window come before; slow-step captures and the
machine's hiccups do not move a median), in wall time and in the training thread's CPU time (what
the hooks add on that thread, without the waits for a core that a loaded machine adds). A shared
machine's load drifts from one run to the next by more than the watch costs, so each mode is set
against the plain run of its own round: the figure is the median of these paired ratios, with
their quartiles and range. Two step sizes: a few-ms step, and a tiny one (hidden 8, batch 1)
where the per-step cost of the hooks shows most.
The watch's own CPU time per step is also measured in-process (its hooks' calls for one step,
100,000 times, CPU time): the figure the side-by-side runs cannot resolve on a loaded machine.
Counted (--count): the tiny script's steps 600-1100 with every Python bytecode counted, in each
mode: what the hooks add per step, exact from run to run, where the timings above are at the mercy
of the machine's load.
Memory: the tiny script for `--long` steps under --follow (200 epochs of a 1,000-batch loader),
reading its own RSS every 5% of the run; the same run without the doctor beside it. The growth
from the first reading to the last is what the run's watch keeps (ring buffers, bins, counters).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SKIP = 300  # steps before the doctor's window has passed

# The scripts' model, optimizer and loader: an MLP of `width` fed `batch` rows at a time.
SETUP = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(1000 * batch, width), torch.randint(0, 10, (1000 * batch,)))
loader = DataLoader(data, batch_size=batch)
"""

SCRIPT = (
    """
import json, os, sys, time

steps, width, batch, keep = (int(a) for a in sys.argv[1:5])
"""
    + SETUP
    + """
page = os.sysconf("SC_PAGE_SIZE")
times, cpu, rss, done = [], [], [], 0
last, last_cpu = time.perf_counter(), time.thread_time()
while done < steps:
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        now, now_cpu = time.perf_counter(), time.thread_time()
        if keep:
            times.append(now - last)
            cpu.append(now_cpu - last_cpu)
        last, last_cpu = now, now_cpu
        done += 1
        if done % max(1, steps // 20) == 0:
            with open("/proc/self/statm") as f:
                rss.append(int(f.read().split()[1]) * page)
        if done >= steps:
            break
print("RESULT " + json.dumps({"times": times, "cpu": cpu, "rss": rss}), flush=True)
"""
)

# The tiny script's steps 600-1100 with every Python bytecode counted (sys.settrace's opcode
# events): what the hooks add per step, exact from run to run and blind to the machine's load.
# The traced steps run ~10x slower: under --follow they would all be judged slow and captured,
# so the watch's slow-step threshold is set out of reach first.
COUNTING = """
import collections, json, math, sys
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(2000, 8), torch.randint(0, 10, (2000,)))
it = iter(DataLoader(data, batch_size=1))

def steps(n):
    for _ in range(n):
        x, y = next(it)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

steps(600)
session = sys.modules.get("torchpace.runner.session")
follow = session._CURRENT.follow if session is not None and session._CURRENT else None
if follow is not None:
    follow.slow.threshold = lambda median: math.inf
    follow._slow_s = math.inf
    follow.slow.next_step = None  # one the machine's load set off earlier: none is due
ops = collections.Counter()

def tracer(frame, event, arg):
    if event == "call":
        frame.f_trace_opcodes = True
    elif event == "opcode":
        code = frame.f_code
        ops[code.co_filename.rpartition("/src/")[2] + ":" + code.co_name] += 1
    return tracer

sys.settrace(tracer)
steps(500)
sys.settrace(None)
print("RESULT " + json.dumps({k: v / 500 for k, v in ops.items()}), flush=True)
"""


# In one doctored process, blocks of steps with the hooks on and with the session inert (every
# hook passes straight through, as in a forked child) alternate: the difference of their median
# steps is the hooks' cost on a real step, the machine's drift between runs cancelled out.
INSITU = (
    """
import json, statistics, sys, time

width, batch, block, rounds = (int(a) for a in sys.argv[1:5])
"""
    + SETUP
    + """

def batches():
    while True:
        yield from loader

it = batches()

def steps(n):
    times = []
    for _ in range(n):
        began = time.thread_time()
        x, y = next(it)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.thread_time() - began)
    return statistics.median(times)

steps(600)
session = sys.modules["torchpace.runner.session"]._CURRENT
on, inert = [], []
for r in range(rounds):
    for inert_now in ((False, True) if r % 2 == 0 else (True, False)):
        session.inert = inert_now
        (inert if inert_now else on).append(steps(block))
session.inert = False
print("RESULT " + json.dumps({"on": on, "inert": inert}), flush=True)
"""
)


def in_process(
    script: Path,
    out: Path,
    shape: tuple[int, int],
    modes: list[str],
    *,
    smoke: bool = False,
    rounds: int | None = None,
) -> None:
    """The hooks' cost per step, hooks on against inert in one process (paired blocks)."""
    width, batch = shape
    block, fixed = (2000, 8) if width < 64 else (1000, 12)  # ~0.5 s, ~1.5 s a block
    rounds = rounds or fixed  # more rounds narrow the quartiles of a larger step's cost
    if smoke:
        block, rounds = 50, 2
    print(f"\nhidden {width}, batch {batch}: in one process, {block}-step blocks alternated")
    for mode in modes[1:]:
        result = run(mode, script, [width, batch, block, rounds], out)
        diffs = [(a - b) * 1e6 for a, b in zip(result["on"], result["inert"], strict=True)]
        on = statistics.median(result["on"]) * 1e6
        q1, mid, q3 = _quartiles(diffs)
        print(
            f"  {mode:<27} on {on:8.1f} us, inert {statistics.median(result['inert']) * 1e6:8.1f}"
            f" us: the hooks {mid:+.1f} us (quartiles {q1:+.1f} to {q3:+.1f}), "
            f"{mid / on:+.2%} of the step"
        )


def counted(script: Path, out: Path, modes: list[str]) -> None:
    """Python bytecodes per step in each mode, and the doctor's own functions' share."""
    print("\nPython bytecodes per step (steps 600-1100 of the tiny script, counted)")
    for mode in modes:
        ops = run(mode, script, [], out)
        own = sum(n for k, n in ops.items() if k.startswith("torchpace/"))
        print(f"  {mode:<27} {sum(ops.values()):7.0f} per step, torchpace's {own:5.0f}")


# Wall time, and the training thread's CPU time (time.thread_time: what the hooks add on that
# thread, without the waits for a core a loaded machine adds to the wall time).
CLOCKS = {"times": "wall time", "cpu": "training thread's CPU time"}
MODES = {
    "plain": [],
    "doctor --follow": ["-m", "torchpace", "doctor", "--follow"],
    "doctor --full": ["-m", "torchpace", "doctor", "--full"],
}
SIZES = {"ms": (512, 64), "tiny": (8, 1)}  # (hidden, batch): a ~2 ms step, a tiny one


BASELINE = " (baseline)"  # a mode's name with this suffix runs from --baseline's src/
SOURCES = {"": ROOT / "src"}


def run(mode: str, script: Path, args: list[int], out: Path) -> dict[str, Any]:
    """One run of the script in `mode`: what it prints after RESULT (its step times and RSS
    readings; COUNTING's bytecodes)."""
    name, baseline, _ = mode.partition(BASELINE)
    doctor = MODES[name]
    cmd = [sys.executable, *doctor, *(["--out", str(out)] if doctor else []), str(script)]
    cmd += [str(a) for a in args]
    env = dict(os.environ, PYTHONPATH=str(SOURCES[baseline]))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])  # type: ignore[no-any-return]
    raise SystemExit(f"{mode}: no result (exit {proc.returncode})\n{proc.stderr[-2000:]}")


def overhead(
    script: Path, out: Path, steps: int, shape: tuple[int, int], repeat: int, modes: list[str]
) -> None:
    """Each mode's median step against the plain run of the same round (paired ratios)."""
    width, batch = shape
    per_run: dict[str, dict[str, list[float]]] = {k: {m: [] for m in modes} for k in CLOCKS}
    for r in range(repeat):
        for mode in modes if r % 2 == 0 else modes[::-1]:  # who goes first alternates
            result = run(mode, script, [steps, width, batch, 1], out)
            for key in CLOCKS:
                per_run[key][mode].append(statistics.median(result[key][SKIP:]) * 1e6)
    for key, what in CLOCKS.items():
        base = per_run[key]["plain"]
        print(f"\nhidden {width}, batch {batch}: median step's {what}, steps {SKIP}-{steps}")
        print(f"  {'plain':<27} {statistics.median(base):9.1f} us  runs: {_listed(base)}")
        for mode in modes[1:]:
            values = per_run[key][mode]
            ratios = [v / b for v, b in zip(values, base, strict=True)]
            q1, mid, q3 = _quartiles(ratios)
            extra = statistics.median(v - b for v, b in zip(values, base, strict=True))
            print(
                f"  {mode:<27} {statistics.median(values):9.1f} us  paired ratio x{mid:.4f} "
                f"(quartiles {q1:.4f}-{q3:.4f}, range {min(ratios):.4f}-{max(ratios):.4f}; "
                f"{extra:+.1f} us)  runs: {_listed(values)}"
            )


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, mid, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, mid, q3


def _listed(values: list[float]) -> str:
    return ", ".join(f"{v:.0f}" for v in values)


def memory(script: Path, out: Path, steps: int) -> None:
    print(f"\nRSS over {steps:,} tiny steps (MiB, every 5% of the run)")
    for mode in ("plain", "doctor --follow"):
        rss = [r / 2**20 for r in run(mode, script, [steps, 8, 1, 0], out)["rss"]]
        readings = " ".join(f"{r:.0f}" for r in rss)
        print(
            f"  {mode:<16} first {rss[0]:.1f}, last {rss[-1]:.1f}, growth {rss[-1] - rss[0]:+.1f}"
        )
        print(f"  {'':<16} {readings}")


def watch_cost(steps: int = 100_000, repeat: int = 5) -> None:
    """The watch's own CPU time per step, in-process: the calls its hooks make in one step (a
    batch, a forward, a backward, an optimizer step, a boundary), without torch's work."""
    import time
    from types import SimpleNamespace

    import torch

    from torchpace.runner.follow import Follow

    follow = Follow(None)
    record = SimpleNamespace(static=SimpleNamespace(batches_per_epoch=1000))
    model = torch.nn.Linear(2, 2)
    follow.ledger.first_signal(time.perf_counter())
    follow.batch(record)
    follow.optimizer_step()  # the record is the training loader's now
    runs = []
    for _ in range(repeat):
        began = time.process_time()
        for _ in range(steps):
            follow.batch(record)
            follow._forward(model, (), {})
            if follow.eval_pass is not None or follow.resumable:  # as the backward hook
                follow.training_signal()
            follow.optimizer_step()
            follow.boundary("done")
        runs.append((time.process_time() - began) / steps * 1e6)
    listed = ", ".join(f"{r:.2f}" for r in runs)
    print(
        f"\nthe watch's own CPU per step (in-process, {steps:,} steps): median "
        f"{statistics.median(runs):.2f} us; runs: {listed}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds (one run of each mode)")
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--long", type=int, default=200_000, help="0: no memory run")
    parser.add_argument("--with-full", action="store_true", help="also doctor --full")
    parser.add_argument("--sizes", default="ms,tiny", help="step sizes: ms, tiny")
    parser.add_argument("--baseline", type=Path, help="another checkout's src/, run beside")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: the script still runs")
    parser.add_argument("--count", action="store_true", help="count bytecodes per step only")
    parser.add_argument(
        "--in-process", action="store_true", help="hooks on against inert in one process only"
    )
    parser.add_argument("--rounds", type=int, help="--in-process: pairs of blocks (8 or 12)")
    args = parser.parse_args()
    sizes = [SIZES[s] for s in args.sizes.split(",")]
    if args.smoke:
        args.repeat, args.steps, args.long, sizes = 1, SKIP + 50, 1000, [SIZES["tiny"]]
    modes = [m for m in MODES if args.with_full or m != "doctor --full"]
    if args.baseline is not None:
        SOURCES[BASELINE] = args.baseline.resolve()
        modes += [m + BASELINE for m in modes[1:]]
    with tempfile.TemporaryDirectory() as tmp:
        script, out = Path(tmp) / "train.py", Path(tmp) / "out"
        script.write_text(SCRIPT)
        import torch

        print(f"torch {torch.__version__}, CPU, {os.cpu_count()} cores (shared)")
        if args.in_process:
            paired = Path(tmp) / "paired.py"
            paired.write_text(INSITU)
            for shape in sizes:
                in_process(paired, out, shape, modes, smoke=args.smoke, rounds=args.rounds)
            return
        if args.count:
            counting = Path(tmp) / "count.py"
            counting.write_text(COUNTING)
            counted(counting, out, modes)
            return
        sys.path.insert(0, str(ROOT / "src"))
        watch_cost(steps=2000 if args.smoke else 100_000)
        for shape in sizes:
            overhead(script, out, args.steps, shape, args.repeat, modes)
        if args.long:
            memory(script, out, args.long)


if __name__ == "__main__":
    main()
