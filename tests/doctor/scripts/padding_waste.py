"""Smell: variable-length token rows, shuffled and padded to each batch's longest (most of every
batch is padding)."""

import torch
from _common import Lines, TokenClassifier, pad_to_longest, take
from torch import nn
from torch.utils.data import DataLoader

loader = DataLoader(Lines(), batch_size=16, shuffle=True, collate_fn=pad_to_longest)
model = TokenClassifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for batch in take(loader):
    logits = model(batch["input_ids"], batch["attention_mask"])
    loss = nn.functional.cross_entropy(logits, batch["labels"])
    opt.zero_grad()
    loss.backward()
    opt.step()
