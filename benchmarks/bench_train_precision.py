"""Is bf16 autocast a speedup on this CPU?  Times fp32 vs bf16 training steps side by side.

Run: PYTHONPATH=src python benchmarks/bench_train_precision.py [--repeats 5]
Prints the median step time of each mode (interleaved repeats, same process) and the ratio,
with the CPU's bf16 capability, so Precision("auto")'s CPU rule can be checked on real hardware.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from torchpace.train import Precision, TrainStep
from torchpace.train.precision import _cpu_bf16


def _workload(kind: str, scale: int = 1) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The MLP or the Transformer, every dimension divided by `scale` (smoke runs: 8)."""
    torch.manual_seed(0)
    if kind == "mlp":
        d, h = 1024 // scale, 4096 // scale
        model = nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d))
        return model, (torch.randn(256 // scale, d),)
    d = 512 // scale
    layer = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True)
    return nn.TransformerEncoder(layer, 2), (torch.randn(16 // scale, 128 // scale, d),)


def _time_steps(step: TrainStep, batch: tuple[torch.Tensor, ...], n: int) -> float:
    step(*batch)  # warm-up
    start = time.perf_counter()
    for _ in range(n):
        step(*batch)
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    scale = 1
    if args.smoke:  # numbers from a smoke run mean nothing
        args.repeats, args.steps, scale = 1, 1, 8
    print(
        f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"bf16: {_cpu_bf16()}, auto picks {Precision('auto', device='cpu').mode}, threads {torch.get_num_threads()}"
    )
    for kind in ("mlp", "transformer"):
        times: dict[str, list[float]] = {"fp32": [], "bf16": []}
        steps = {}
        for mode in times:
            model, batch = _workload(kind, scale)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            steps[mode] = (
                TrainStep(
                    model,
                    opt,
                    loss_fn=lambda m, x: m(x).float().pow(2).mean(),
                    precision=Precision(mode, device="cpu"),
                ),
                batch,
            )  # type: ignore[arg-type]
        for _ in range(args.repeats):  # interleaved, so machine noise hits both modes alike
            for mode, (step, batch) in steps.items():
                times[mode].append(_time_steps(step, batch, args.steps))
        fp32, bf16 = (statistics.median(times[m]) * 1000 for m in ("fp32", "bf16"))
        print(
            f"{kind:12s} fp32 {fp32:8.1f} ms/step   bf16 {bf16:8.1f} ms/step   "
            f"speedup {fp32 / bf16:.2f}x"
        )


if __name__ == "__main__":
    main()
