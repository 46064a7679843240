"""Smell: each epoch validates with autograd on, saves a blocking checkpoint with torch.save, and
starts its loaders' workers again (persistent_workers=False). `--epochs N` (default 3)."""

import sys
import tempfile

import torch
from _common import images, mlp
from torch import nn
from torch.utils.data import DataLoader

EPOCHS = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 3

model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
train = DataLoader(images(256), batch_size=16, num_workers=2, persistent_workers=False)
val = DataLoader(images(512), batch_size=16, num_workers=2, persistent_workers=False)
folder = tempfile.mkdtemp()
for _epoch in range(EPOCHS):
    model.train()
    for x, y in train:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    correct = 0
    for x, y in val:  # no torch.no_grad(): every forward records a graph
        correct += int((model(x).argmax(1) == y).sum())
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "ema": torch.zeros(1 << 23)}
    torch.save(state, f"{folder}/last.pt")
