"""Smell: variable-length token rows, shuffled and padded to each batch's longest (most of every
batch is padding)."""

import torch
from _common import Lines, TokenClassifier, take
from torch import nn
from torch.utils.data import DataLoader


def collate(samples: list[dict]) -> dict:
    """Pad to the longest row of the batch, with an attention mask (as a tokenizer's pad does)."""
    ids = nn.utils.rnn.pad_sequence([s["input_ids"] for s in samples], batch_first=True)
    labels = torch.tensor([s["label"] for s in samples])
    return {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": labels}


loader = DataLoader(Lines(), batch_size=16, shuffle=True, collate_fn=collate)
model = TokenClassifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for batch in take(loader):
    logits = model(batch["input_ids"], batch["attention_mask"])
    loss = nn.functional.cross_entropy(logits, batch["labels"])
    opt.zero_grad()
    loss.backward()
    opt.step()
