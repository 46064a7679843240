"""What does monitoring cost per step?  Times a tiny CPU training loop bare and monitored.

Run: PYTHONPATH=src python benchmarks/bench_train_monitor.py [--repeats 7 --steps 300]
A tiny model makes the step short, so the meter's own cost (track() + step()) shows; the
figure to read is the added microseconds per step, measured side by side (interleaved repeats).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from torchpace.monitor import Throughput


def _loop(monitored: bool, steps: int, device_tokens: bool = False) -> Callable[[], float]:
    torch.manual_seed(0)
    model = nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [torch.randn(8, 16) for _ in range(steps)]

    def run() -> float:
        meter = Throughput(device="cpu")
        source = meter.track(batches) if monitored else batches
        start = time.perf_counter()
        for x in source:
            model(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
            if monitored:
                tokens = (x > 0).sum() if device_tokens else x.numel()
                meter.step(samples=x.shape[0], tokens=tokens)
        return (time.perf_counter() - start) / steps

    return run


def _meter_call_us(calls: int = 20_000, repeats: int = 5) -> float:
    """The meter's own cost: track()'s next() plus step(), per step, best of `repeats` (least noise)."""
    best = float("inf")
    for _ in range(repeats):
        meter = Throughput(device="cpu")
        start = time.perf_counter()
        for _ in meter.track(range(calls)):
            meter.step(samples=8, tokens=128)
        bare = time.perf_counter()
        for _ in range(calls):
            pass
        best = min(best, (bare - start - (time.perf_counter() - bare)) / calls)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    if args.smoke:  # numbers from a smoke run mean nothing
        args.repeats, args.steps = 1, 20
    runs = {
        "bare": _loop(False, args.steps),
        "monitored": _loop(True, args.steps),
        "monitored, tokens counted on the device": _loop(True, args.steps, device_tokens=True),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            times[name].append(run())
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    bare = statistics.median(times["bare"]) * 1e6
    for name in runs:
        us = statistics.median(times[name]) * 1e6
        print(f"{name:40s} {us:7.1f} us/step  ({us - bare:+6.1f} us, {us / bare - 1:+.1%})")
    print(f"the meter alone (track + step, best of 5): {_meter_call_us():.2f} us/step")


if __name__ == "__main__":
    main()
