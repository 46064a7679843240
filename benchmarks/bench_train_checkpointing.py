"""Activation checkpointing: bytes saved for backward and the step-time cost, on CPU.

Run: PYTHONPATH=src python benchmarks/bench_train_checkpointing.py [--repeats 5]
Saved bytes are counted exactly with autograd's saved-tensor hooks (what backward keeps alive);
step times are medians of interleaved repeats in one process, so noise hits both alike.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from torchpace.train import checkpoint_modules


def _model(checkpointed: bool) -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0)
    model = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
    if checkpointed:
        checkpoint_modules(model, nn.TransformerEncoderLayer)
    return model


def _saved_bytes(model: nn.Module, x: torch.Tensor) -> int:
    seen: dict[int, int] = {}
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in weights:  # weights live anyway; count activations, each storage once
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(x).pow(2).mean()
    loss.backward()
    return sum(seen.values())


def _step_s(model: nn.Module, x: torch.Tensor) -> float:
    start = time.perf_counter()
    model(x).pow(2).mean().backward()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    if args.smoke:  # numbers from a smoke run mean nothing
        args.repeats = 1
    x = torch.randn(1, 16, 256) if args.smoke else torch.randn(4, 128, 256)
    models = {"plain": _model(False), "checkpointed": _model(True)}
    saved = {name: _saved_bytes(m, x) for name, m in models.items()}
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(args.repeats):
        for name, m in models.items():
            times[name].append(_step_s(m, x))
    print(f"torch {torch.__version__}, 4-layer Transformer d=256, batch 4 x 128 tokens, CPU")
    for name in models:
        ms = statistics.median(times[name]) * 1000
        print(f"{name:13s} saved for backward {saved[name] / 2**20:7.1f} MiB   step {ms:7.1f} ms")
    ratio = statistics.median(times["checkpointed"]) / statistics.median(times["plain"])
    print(
        f"activation memory x{saved['checkpointed'] / saved['plain']:.2f}, step time x{ratio:.2f}"
    )


if __name__ == "__main__":
    main()
