"""Fixed twin of whole_run.py: validation under torch.no_grad(), the checkpoint saved from a
background thread on a CPU copy, and workers kept across epochs (persistent_workers=True)."""

import sys
import tempfile
import threading

import torch
from _common import images, mlp
from torch import nn
from torch.utils.data import DataLoader

EPOCHS = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 3


def save_in_background(state: dict, path: str) -> threading.Thread:
    copy = {k: v.detach().cpu().clone() for k, v in state.items()}  # what the thread writes
    thread = threading.Thread(target=torch.save, args=(copy, path))
    thread.start()
    return thread


model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
train = DataLoader(images(256), batch_size=16, num_workers=2, persistent_workers=True)
val = DataLoader(images(512), batch_size=16, num_workers=2, persistent_workers=True)
folder = tempfile.mkdtemp()
saving = None
for _epoch in range(EPOCHS):
    model.train()
    for x, y in train:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val:
            correct += int((model(x).argmax(1) == y).sum())
    if saving is not None:
        saving.join()
    saving = save_in_background(
        {**model.state_dict(), "ema": torch.zeros(1 << 23)}, f"{folder}/last.pt"
    )
saving.join()
