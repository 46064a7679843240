"""Smell: causal self-attention written by hand (nanoGPT's slow path): q @ k^T, mask, softmax, @ v."""

import math

import torch
from _common import steps_from_argv
from torch import nn
from torch.nn import functional as F

torch.set_num_threads(1)  # the same shares of work on a quiet and a busy machine
SEQ, WIDTH, HEADS = 128, 64, 4
DROPOUT = 0.0  # nanoGPT's default for pre-training (on the CPU, SDPA with dropout runs unfused)


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.register_buffer("causal", torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.causal, float("-inf"))
        att = F.dropout(F.softmax(att, dim=-1), DROPOUT, self.training)
        return att @ v

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in self.qkv(x).split(c, 2))
        return self.out(self.attend(q, k, v).transpose(1, 2).reshape(b, t, c))


class TinyGPT(nn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(256, WIDTH)
        self.blocks = nn.ModuleList(SelfAttention() for _ in range(layers))
        self.head = nn.Linear(WIDTH, 256)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def train(model: nn.Module) -> None:
    """Next-byte prediction on random bytes, batch 8 x 128, for --iters steps."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, 256, (4096,), generator=torch.Generator().manual_seed(0))
    for _ in range(steps_from_argv()):
        starts = torch.randint(0, len(data) - SEQ - 1, (8,))
        x = torch.stack([data[s : s + SEQ] for s in starts])
        y = torch.stack([data[s + 1 : s + SEQ + 1] for s in starts])
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    train(TinyGPT())
