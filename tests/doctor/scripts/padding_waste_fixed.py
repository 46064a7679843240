"""Fixed twin: rows of similar length batched together (BucketBatchSampler), padded by pad_collate."""

from functools import partial

import torch
from _common import Lines, TokenClassifier, take
from torch import nn
from torch.utils.data import DataLoader

from torchpace.data import BucketBatchSampler, pad_collate

lines = Lines()
sampler = BucketBatchSampler([len(r) for r in lines.rows], batch_size=16, shuffle=True)
loader = DataLoader(lines, batch_sampler=sampler, collate_fn=partial(pad_collate, pad_value=0))
model = TokenClassifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for batch in take(loader):
    ids = batch["input_ids"]
    loss = nn.functional.cross_entropy(model(ids, (ids != 0).long()), batch["label"])
    opt.zero_grad()
    loss.backward()
    opt.step()
