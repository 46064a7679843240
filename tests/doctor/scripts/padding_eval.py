"""Padded batches in training and in an evaluation pass after every step (4 batches without
autograd): the evaluation loader's padding costs evaluation time, not the training steps'."""

import itertools

import torch
from _common import Lines, TokenClassifier, pad_to_longest, take
from torch import nn
from torch.utils.data import DataLoader

train = DataLoader(Lines(), batch_size=16, shuffle=True, collate_fn=pad_to_longest)
val = DataLoader(Lines(256), batch_size=16, collate_fn=pad_to_longest)
model = TokenClassifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for batch in take(train):
    logits = model(batch["input_ids"], batch["attention_mask"])
    loss = nn.functional.cross_entropy(logits, batch["labels"])
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        for v in itertools.islice(val, 4):
            model(v["input_ids"], v["attention_mask"])
    model.train()
