"""Workers on a CPU run, measured the way `doctor --verify` will: fresh processes, interleaved.

Each arm runs `benchmarks/_workers_loop.py` in a new process (torchpace.measure.process.command_arm)
with a DataLoader setting; the core interleaves them (plain, 1 worker, 2 workers, plain, ...),
compares each with the plain runs beside it, and records the machine's load. Two datasets:

    cheap: MNIST-shaped uint8 images normalised per sample (microseconds: the loading computes)
    waits: the same, plus 1 ms of sleep per sample (a slow disk or object store: the loading waits)

    PYTHONPATH=src python benchmarks/bench_measure_workers.py [--rounds 4] [--steps 30]

Prints, per dataset and worker count, the speedup with its 95% interval and the verdict, and the
worker policy's advice for this machine (torchpace.fixes.workers) beside it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchpace.cores import usable_cores
from torchpace.fixes.workers import Host, Stall, advise
from torchpace.measure import Settings, measure
from torchpace.measure.process import command_arm

LOOP = Path(__file__).with_name("_workers_loop.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    datasets, counts = ("cheap", "waits"), (0, 1, 2)
    if args.smoke:  # numbers from a smoke run mean nothing
        args.rounds, args.steps, args.warmup = 1, 2, 1
        datasets, counts = ("waits",), (0, 1)
    settings = Settings(
        warmup=args.warmup, steps=args.steps, repeats=args.rounds, prime=not args.smoke
    )
    cores = usable_cores()
    print(f"{cores} usable cores; {args.rounds} rounds x {args.steps} steps after {args.warmup}")
    for data in datasets:
        arms = [
            command_arm(f"{data}, {w} workers", [sys.executable, str(LOOP), data, str(w)])
            for w in counts
        ]
        result = measure(arms, settings, progress=None)
        print(f"\n{data}: {result.load.line()}")
        if result.load.warning:
            print(f"  WARNING: {result.load.warning}")
        base = result.baseline
        print(f"  {base.name}: median {base.median_ms:.1f} ms per step")
        for arm in result.arms[1:]:
            r = arm.ratio
            assert r is not None
            if arm.verdict == "inconclusive":  # no ratio: its interval says nothing
                print(f"  {arm.name}: {arm.median_ms:.1f} ms, {arm.why}")
                continue
            print(
                f"  {arm.name}: {arm.median_ms:.1f} ms, speedup {r.speedup:.2f}x "
                f"[{r.speedup_low:.2f}-{r.speedup_high:.2f}] -> {arm.verdict}"
            )
        cpu = 0.95 if data == "cheap" else 0.05
        advice = advise(
            Host(cores, 1, "cpu"), Stall(base.median_ms * 0.5, base.median_ms, 0, None, cpu)
        )
        print(f"  policy: {advice.workers} workers, {advice.pays}: {advice.reason}")


if __name__ == "__main__":
    main()
