"""What does DDP no_sync save during gradient accumulation?  2 ranks, gloo, on this machine.

Run: PYTHONPATH=src python benchmarks/bench_train_no_sync.py [--repeats 5 --accumulate 4]
It relaunches itself under torchrun (2 processes). Each repeat times a few optimizer steps of
TrainStep (all-reduce once per optimizer step) and of the naive loop (all-reduce after every
micro-batch), interleaved; rank 0 prints the medians and the ratio. Same gradients either way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
from torch import nn

from torchpace import dist
from torchpace.train import TrainStep


def _loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x).pow(2).mean()


def _naive_step(model: nn.Module, opt: torch.optim.Optimizer, xs: list[torch.Tensor]) -> None:
    for x in xs:  # every backward all-reduces: what loops without no_sync do
        (_loss(model, x) / len(xs)).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _time(fn, steps: int) -> float:  # type: ignore[no-untyped-def]
    dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    dist.barrier()
    return (time.perf_counter() - start) / steps


def worker(args: argparse.Namespace) -> None:
    dist.init()
    torch.manual_seed(0)
    width = 1024  # ~4M parameters: 16 MB of fp32 gradients to all-reduce
    model = dist.wrap(
        nn.Sequential(
            nn.Linear(width, width),
            nn.GELU(),
            nn.Linear(width, width),
            nn.GELU(),
            nn.Linear(width, width),
            nn.GELU(),
            nn.Linear(width, width),
        )
    )
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    xs = [torch.randn(8, width) for _ in range(args.accumulate)]
    step = TrainStep(model, opt, loss_fn=_loss, accumulate=args.accumulate)

    def with_no_sync() -> None:
        for x in xs:
            step(x)

    runs = {
        "TrainStep (no_sync)": with_no_sync,
        "naive (sync every micro-batch)": lambda: _naive_step(model, opt, xs),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for fn in runs.values():
        _time(fn, 1)  # warm-up
    for _ in range(args.repeats):
        for name, fn in runs.items():
            times[name].append(_time(fn, args.steps))
    if dist.is_main():
        print(
            f"torch {torch.__version__}, 2 ranks gloo, accumulate {args.accumulate}, "
            f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters"
        )
        base = statistics.median(times["naive (sync every micro-batch)"])
        for name, values in times.items():
            ms = statistics.median(values) * 1000
            print(f"{name:32s} {ms:8.1f} ms per optimizer step   speedup {base * 1000 / ms:.2f}x")
    # Leave together: rank 1 leaving while rank 0 still printed aborted once in gloo's teardown
    # ("terminate called without an active exception", in make test on a busy machine).
    dist.barrier()
    dist.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--accumulate", type=int, default=4)
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    if args.smoke:  # numbers from a smoke run mean nothing
        args.repeats, args.steps = 1, 1
    if dist.launched():
        worker(args)
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        __file__,
        *sys.argv[1:],
    ]
    raise SystemExit(subprocess.call(cmd, env=env))


if __name__ == "__main__":
    main()
