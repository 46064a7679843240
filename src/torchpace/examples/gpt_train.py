"""A small GPT (decoder-only transformer) trained on synthetic tokens, written plainly.

    python examples/gpt_train.py --iters 50
    torchpace doctor examples/gpt_train.py --iters 50

The model follows the usual recipe (token + position embeddings, pre-norm blocks of causal
self-attention and an MLP, a tied output head); 6 layers of width 384 by default (~10M parameters).
The data is a synthetic token stream with structure to learn (nothing is downloaded); batches are
sampled from it at random offsets, as character-level GPT training loops do (no DataLoader).
"""

import argparse
import math
import time

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        # (B, T, C) -> (B, heads, T, C / heads)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, block_size: int, n_layer: int, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, n_embd)
        self.pos = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)
        self.head.weight = self.tok.weight  # weight tying
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        # Small weights (std 0.02), as GPT-2 does: the tied head starts with near-uniform logits.
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def synthetic_tokens(n: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """A token stream with structure: each token is mostly the previous one plus a small step."""
    g = torch.Generator().manual_seed(seed)
    steps = torch.randint(1, 4, (n,), generator=g)
    return torch.cumsum(steps, 0) % vocab


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--n-layer", type=int, default=6)
    parser.add_argument("--n-embd", type=int, default=384)
    parser.add_argument("--n-head", type=int, default=6)
    parser.add_argument("--vocab", type=int, default=65)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = synthetic_tokens(200_000, args.vocab).to(device)
    model = GPT(args.vocab, args.block_size, args.n_layer, args.n_embd, args.n_head).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    params = sum(p.numel() for p in model.parameters())
    print(f"{params / 1e6:.1f}M parameters on {device}")

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(data) - args.block_size - 1, (args.batch_size,), device=device)
        x = torch.stack([data[i : i + args.block_size] for i in ix.tolist()])
        y = torch.stack([data[i + 1 : i + 1 + args.block_size] for i in ix.tolist()])
        return x, y

    t0 = time.perf_counter()
    for it in range(args.iters):
        x, y = get_batch()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if it % 10 == 0:
            # .item() waits for the device: only every 10 iterations
            dt = (time.perf_counter() - t0) * 1000 / (it + 1)
            print(f"iter {it} loss {loss.item():.3f} ({dt:.0f} ms/iter, ppl {math.exp(loss):.1f})")


if __name__ == "__main__":
    main()
