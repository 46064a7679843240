"""`text`: a small GPT on synthetic token sequences whose lengths follow a log-normal law."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from torchpace.bench.workloads.base import Batch, Workload, parameter_count
from torchpace.data import pad_collate

# Targets at padded positions: cross_entropy skips them, and tokens/s does not count them.
IGNORE_INDEX = -100


@dataclass(frozen=True)
class TextSize:
    """Model and sequence shape for one size of the text workload."""

    vocab: int
    dim: int
    layers: int
    heads: int
    max_len: int
    median_len: int
    batch_size: int
    epoch_batches: int
    sigma: float = 0.7


SIZES = {
    "tiny": TextSize(64, 16, 2, 2, 32, 10, 4, 3),
    "small": TextSize(512, 64, 2, 2, 128, 24, 16, 8),
    "full": TextSize(8192, 384, 6, 6, 512, 96, 64, 20),
}


class SyntheticSequences(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """(inputs, next-token targets) with log-normal lengths; each follows a learnable arithmetic pattern."""

    def __init__(self, n: int, spec: TextSize, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        raw = torch.empty(n).log_normal_(math.log(spec.median_len), spec.sigma, generator=g)
        # Tokens per sequence; a sample is its first length-1 tokens and their successors.
        self.lengths = raw.round().clamp(4, spec.max_len).long().tolist()
        self.starts = torch.randint(0, spec.vocab, (n,), generator=g).tolist()
        self.steps = torch.randint(1, 8, (n,), generator=g).tolist()
        self.vocab = spec.vocab

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(self.lengths[index])
        tokens = (self.starts[index] + self.steps[index] * positions) % self.vocab
        return tokens[:-1], tokens[1:]


# Right-pads both fields to the batch's longest (rounded up to 8); padded targets are ignored.
lm_collate = functools.partial(pad_collate, pad_value={0: 0, 1: IGNORE_INDEX})


def count_tokens(batch: Batch) -> int:
    """Real (unpadded) target tokens in a batch."""
    return int((batch[1] != IGNORE_INDEX).sum())


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Next-token cross entropy over real tokens."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,
    )


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention then an MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        # Right padding with a causal mask: real tokens never attend to the pads after them.
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A small decoder-only transformer with learned positions."""

    def __init__(self, spec: TextSize) -> None:
        super().__init__()
        self.tok = nn.Embedding(spec.vocab, spec.dim)
        self.pos = nn.Embedding(spec.max_len, spec.dim)
        self.blocks = nn.ModuleList(Block(spec.dim, spec.heads) for _ in range(spec.layers))
        self.ln_f = nn.LayerNorm(spec.dim)
        self.head = nn.Linear(spec.dim, spec.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def _adamw(params: object) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=1e-3)  # type: ignore[arg-type]


def build(size: str = "small", seed: int = 0) -> Workload:
    """The text workload at one size: "tiny" (tests), "small" (CPU), "full" (GPU)."""
    spec = SIZES[size]
    n = spec.batch_size * spec.epoch_batches
    dataset = SyntheticSequences(n, spec, seed)
    probe = GPT(spec)
    lengths = sorted(dataset.lengths)
    return Workload(
        name="text",
        build_model=lambda: GPT(spec),
        dataset=dataset,
        loss=lm_loss,
        batch_size=spec.batch_size,
        collate=lm_collate,
        unit="tokens",
        count_units=count_tokens,
        lengths=[n - 1 for n in dataset.lengths],
        token_budget=spec.batch_size * lengths[len(lengths) // 2],
        make_optimizer=_adamw,
        epoch_batches=spec.epoch_batches,
        description=f"GPT ({spec.layers} layers, dim {spec.dim}), log-normal sequence lengths ({size})",
        facts={
            "size": size,
            "parameters": parameter_count(probe),
            "batch_size": spec.batch_size,
            "median_len": lengths[len(lengths) // 2],
            "max_len": max(lengths),
            "dataset_samples": n,
        },
    )
