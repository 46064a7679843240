"""Shared pieces of the smell scripts: a tiny dataset and model, and a loop length from argv."""

import itertools
import sys
from collections.abc import Iterable, Iterator

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


def steps_from_argv(default: int = 40) -> int:
    """`--iters N` from the command line (the scripts are run by the doctor with their own args)."""
    return int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else default


def images(n: int = 256) -> TensorDataset:
    """Random 3x16x16 images with 10 classes."""
    g = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(n, 3, 16, 16, generator=g), torch.randint(0, 10, (n,), generator=g)
    )


def mlp() -> nn.Module:
    """A small classifier over flattened images."""
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 32), nn.ReLU(), nn.Linear(32, 10))


def take(batches: Iterable) -> Iterator:
    """The first `--iters` batches (default 40)."""
    return itertools.islice(batches, steps_from_argv())


def sgd_steps() -> Iterator[int]:
    """Train mlp() on images() with SGD for `--iters` batches; yield each step's index once its
    optimizer step is done (the robustness scripts act on the script's side between steps)."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i, (x, y) in enumerate(take(DataLoader(images(), batch_size=8))):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        yield i


class Lines(Dataset):
    """Token rows of 8-256 tokens, most of them short (as lines of text are), with a label."""

    def __init__(self, n: int = 512) -> None:
        g = torch.Generator().manual_seed(0)
        lengths = (8 + torch.empty(n).exponential_(1 / 40, generator=g)).clamp(max=256).long()
        self.rows = [torch.randint(1, 1000, (int(k),), generator=g) for k in lengths]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.rows[i], "label": i % 2}


def pad_to_longest(samples: list[dict]) -> dict:
    """Pad to the longest row of the batch, with an attention mask (as a tokenizer's pad does)."""
    ids = nn.utils.rnn.pad_sequence([s["input_ids"] for s in samples], batch_first=True)
    labels = torch.tensor([s["label"] for s in samples])
    return {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": labels}


class TokenClassifier(nn.Module):
    """Embeds tokens, mixes each position, pools the unpadded ones (mask: 1 = a real token)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(1000, 64, padding_idx=0)
        self.mix = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
        self.head = nn.Linear(64, 2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.mix(self.embed(ids)) * mask[..., None]  # every position computes, padding too
        return self.head(h.sum(1) / mask.sum(1, keepdim=True))
