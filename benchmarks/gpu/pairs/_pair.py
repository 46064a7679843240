"""What every before/after pair shares: record one small trace per variant, then time both side by
side, and write what was measured beside the traces.

A pair is a training loop written once as a generator, `train(device, size, fixed)`, that yields
after each step: `fixed=False` is the slow "before", `fixed=True` the same loop with one fix, same
seed. This module drives it:

    out/before.json.gz, out/after.json.gz   torch.profiler traces (CPU + CUDA activities, shapes,
                                            memory), a few steps each: fixtures-to-be
    out/pair.json                           before and after ms per step, unprofiled, interleaved
                                            rounds through torchpace.measure, with the device

`torchpace analyze` judges the traces and calibrate.py sets each rule's estimated saving beside the
measured difference (docs/rules-calibration.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from torchpace.bench.results import environment
from torchpace.measure import Arm, Settings, Timed, Window, measure

Train = Callable[[torch.device, str, bool], Iterator[None]]
SIZES = ("tiny", "gpu")  # tiny: the CPU rehearsal (seconds); gpu: the H100/H200 recording
# Profiler schedule: one step skipped, two warm-up steps (cuBLAS/cuDNN handles, allocator growth,
# first-launch costs stay out), five recorded: the analyser may set the first recorded step apart
# as warm-up when it is far slower (the profiler's own start), and the median wants the rest.
WAIT, WARMUP, ACTIVE = 1, 2, 5


@dataclass(frozen=True)
class Pair:
    """One before/after pair: the rule its before-trace should fire, and the loop."""

    name: str
    rule: str
    what: str  # "before -> after" in a few words
    train: Train


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so that a host clock read after it is honest."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def release(device: torch.device) -> None:
    """Hand cached blocks back to the driver after a variant, so the next one starts as a fresh
    process would: the near-capacity pair's freed ballast must not count as the after-run's
    reserved memory."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _memory(device: torch.device, retries_before: int) -> dict[str, int]:
    """The allocator's high-water mark and retries (cudaFree-all and retry) during one variant."""
    if device.type != "cuda":
        return {}
    stats = torch.cuda.memory_stats(device)
    return {
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
        "capacity_bytes": torch.cuda.mem_get_info(device)[1],
        "alloc_retries_count": int(stats.get("num_alloc_retries", 0)) - retries_before,
    }


def record(pair: Pair, device: torch.device, size: str, fixed: bool, path: Path) -> dict[str, int]:
    """Profile WAIT + WARMUP + ACTIVE steps of one variant into a gzipped Kineto trace; return
    the allocator's figures for the run (CUDA only)."""
    activities = [ProfilerActivity.CPU]
    retries = 0
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
        torch.cuda.reset_peak_memory_stats(device)
        retries = int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0))
    steps = pair.train(device, size, fixed)
    try:
        with profile(
            activities=activities,
            schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
            record_shapes=True,  # tensor-core-unfriendly-shape reads GEMM shapes
            profile_memory=True,  # memory-pressure reads the allocator's reserved bytes
            on_trace_ready=lambda p: p.export_chrome_trace(str(path)),  # .gz: written gzipped
        ) as prof:
            for _ in range(WAIT + WARMUP + ACTIVE):
                next(steps)
                prof.step()
        return _memory(device, retries)
    finally:
        steps.close()
        release(device)


def _arm(pair: Pair, device: torch.device, size: str, fixed: bool) -> Callable[[Window], Timed]:
    def run(window: Window) -> Timed:
        steps = pair.train(device, size, fixed)
        try:
            for _ in range(window.warmup):
                next(steps)
            # One sync before and one after the window, none per step: a per-step sync would
            # itself be the sync-point pair's "before" and hide what its fix saves.
            sync(device)
            start = time.perf_counter()
            for _ in range(window.steps):
                next(steps)
            sync(device)
            return Timed(((time.perf_counter() - start) * 1e3 / window.steps,))
        finally:
            steps.close()
            release(device)

    return run


def time_pair(pair: Pair, device: torch.device, size: str, settings: Settings) -> dict[str, Any]:
    """Before and after, unprofiled, in interleaved rounds; ms per step and the saving."""
    arms = [
        Arm("before", _arm(pair, device, size, False)),
        Arm("after", _arm(pair, device, size, True)),
    ]
    measured = measure(arms, settings)
    before, after = measured.arm("before"), measured.arm("after")
    ratio = after.ratio
    assert ratio is not None  # every arm but the baseline has one
    return {
        "before_step_ms": round(before.median_ms, 4),
        "after_step_ms": round(after.median_ms, 4),
        # saving = before x (1 - after/before) from the paired ratio (each after-run against the
        # before-runs beside it), not a difference of medians: one estimator for point and interval
        "measured_saving_ms": round(before.median_ms * (1 - ratio.point), 4),
        "measured_saving_interval_ms": [
            round(before.median_ms * (1 - ratio.high), 4),
            round(before.median_ms * (1 - ratio.low), 4),
        ],
        "speedup": round(ratio.speedup, 4),
        "speedup_interval": [round(ratio.speedup_low, 4), round(ratio.speedup_high, 4)],
        "verdict": after.verdict,
        "rounds": settings.repeats,
        "steps_per_run": settings.steps,
        "load": measured.load.line(),
    }


def _parse(pair: Pair, argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=f"{pair.name}: {pair.what} ({pair.rule})")
    parser.add_argument("--out", required=True, help="folder for the traces and pair.json")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None)
    parser.add_argument("--size", choices=SIZES, default=None, help="default: gpu on cuda")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved rounds")
    args = parser.parse_args(argv)
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but torch.cuda.is_available() is False; use --device cpu")
    args.size = args.size or ("gpu" if args.device == "cuda" else "tiny")
    return args


def main(pair: Pair, argv: list[str] | None = None) -> int:
    """Record before and after, time them side by side, write pair.json; print one line."""
    args = _parse(pair, argv)
    device, out = torch.device(args.device), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    memory = {
        f"{name}_memory": record(pair, device, args.size, fixed, out / f"{name}.json.gz")
        for fixed, name in ((False, "before"), (True, "after"))
    }
    tiny = args.size == "tiny"
    settings = Settings(
        warmup=2 if tiny else 5,
        steps=args.steps or (3 if tiny else 20),
        repeats=args.repeats or (2 if tiny else 5),
    )
    figures = time_pair(pair, device, args.size, settings)
    doc = {
        "pair": pair.name,
        "rule": pair.rule,
        "what": pair.what,
        "size": args.size,
        # where the figures come from: never a figure without its device and versions
        "environment": dataclasses.asdict(environment(device)),
        **figures,
        **memory,
    }
    (out / "pair.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(
        f"{pair.name}: before {figures['before_step_ms']:.3f} ms/step, after "
        f"{figures['after_step_ms']:.3f} ms/step ({figures['speedup']:.2f}x, {figures['verdict']}) "
        f"on {environment(device).line()}"
    )
    return 0
