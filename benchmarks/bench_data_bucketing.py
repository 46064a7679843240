"""Variable-length text: padding waste and tokens/s of four batching strategies on a CPU transformer.

Lengths are log-normal (median ~90 tokens, long tail clipped at 1024), as in real text corpora.
Strategies: random batches, a sort-within-window baseline (sort 4 batches' worth, cut, shuffle),
BucketBatchSampler and TokenBudgetBatchSampler. Padding waste is exact, over a whole epoch's plan.
Tokens/s: the same small transformer trains (forward + backward) on each plan's batches, in plan
order, for a fixed time slice; it counts real (unpadded) tokens. Slices are interleaved and
repeated, and the median is reported: the machine is shared and noisy.

    PYTHONPATH=src python benchmarks/bench_data_bucketing.py [--samples 20000] [--seconds 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from torchpace.data import BucketBatchSampler, TokenBudgetBatchSampler, pad_collate

VOCAB = 1000


def _random_batches(n: int, batch: int, rng: np.random.Generator) -> list[list[int]]:
    order = rng.permutation(n).tolist()
    return [order[i : i + batch] for i in range(0, n, batch)]


def _window_batches(lengths: np.ndarray, batch: int, rng: np.random.Generator, window: int = 4):
    order = rng.permutation(len(lengths))
    batches = []
    for start in range(0, len(order), batch * window):
        chunk = order[start : start + batch * window]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")].tolist()
        batches += [chunk[i : i + batch] for i in range(0, len(chunk), batch)]
    return [batches[i] for i in rng.permutation(len(batches))]


class TinyLM(nn.Module):
    """A two-layer transformer encoder with a language-model head."""

    def __init__(self, dim: int = 128) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, dim * 2, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, tokens: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        """Next-token logits; padded positions are masked out of attention."""
        return self.head(self.encoder(self.embed(tokens), src_key_padding_mask=pad_mask))


def _padding(batches: list[list[int]], lengths: np.ndarray, multiple_of: int = 8) -> float:
    real = sum(int(lengths[b].sum()) for b in batches)
    padded = sum(-(-int(lengths[b].max()) // multiple_of) * multiple_of * len(b) for b in batches)
    return padded / real - 1


def _train(batches: list[list[int]], lengths: np.ndarray, seconds: float, skip: int) -> float:
    """Real tokens per second of forward + backward over the plan's batches for `seconds`."""
    torch.manual_seed(0)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = 0
    start = time.perf_counter()
    for step in range(len(batches)):
        if time.perf_counter() - start > seconds:
            break
        indices = batches[(skip + step) % len(batches)]
        texts = [torch.randint(0, VOCAB, (int(lengths[i]),)) for i in indices]
        padded, lengths_t = pad_collate(texts, return_lengths=True)
        mask = torch.arange(padded.shape[1]) >= lengths_t[:, None]
        logits = model(padded, mask)
        loss = F.cross_entropy(logits[~mask], padded[~mask])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tokens += int(lengths_t.sum())
    return tokens / (time.perf_counter() - start)


def main() -> None:
    """Build each strategy's epoch plan, time training slices side by side, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--smoke", action="store_true", help="seconds, tiny sizes: the test that keeps it running"
    )
    args = parser.parse_args()
    if args.smoke:  # numbers from a smoke run mean nothing
        args.samples, args.seconds, args.repeats, args.batch_size = 200, 0.2, 1, 4
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    lengths = rng.lognormal(4.5, 0.8, args.samples).astype(int).clip(4, 1024)
    budget = args.batch_size * int(np.mean(lengths))  # same mean tokens per batch as batch_size
    plans = {
        "random batches": _random_batches(len(lengths), args.batch_size, rng),
        "sort within window (4 batches)": _window_batches(lengths, args.batch_size, rng),
        "BucketBatchSampler": list(BucketBatchSampler(lengths, args.batch_size, seed=0)),
        f"TokenBudgetBatchSampler({budget})": list(
            TokenBudgetBatchSampler(lengths, budget, multiple_of=8, seed=0)
        ),
    }
    rates: dict[str, list[float]] = {name: [] for name in plans}
    for repeat in range(args.repeats):  # interleaved: machine noise hits every strategy alike
        for name, batches in plans.items():
            rates[name].append(_train(batches, lengths, args.seconds, skip=repeat * 50))
    base = statistics.median(rates["random batches"])
    print(
        f"torch {torch.__version__}, 1 thread, load average {os.getloadavg()[0]:.1f} on "
        f"{len(os.sched_getaffinity(0))} cores; {args.samples} samples, median length "
        f"{int(np.median(lengths))}, max {int(lengths.max())}; median of {args.repeats} slices of {args.seconds:.0f} s"
    )
    print(f"{'strategy':36s} {'batches':>7s} {'padding':>8s} {'tokens/s':>9s} {'speedup':>8s}")
    for name, batches in plans.items():
        rate = statistics.median(rates[name])
        print(
            f"{name:36s} {len(batches):7d} {_padding(batches, lengths):8.1%} {rate:9.0f} "
            f"{rate / base:7.2f}x"
        )


if __name__ == "__main__":
    main()
