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


def host_copy(obj: object) -> object:  # the rule's fix, as it gives it
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: host_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [host_copy(v) for v in obj] if isinstance(obj, list) else tuple(map(host_copy, obj))
    return obj


def save_in_background(state: dict, path: str) -> threading.Thread:
    thread = threading.Thread(target=torch.save, args=(host_copy(state), path))
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
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "ema": torch.zeros(1 << 23)}
    saving = save_in_background(state, f"{folder}/last.pt")  # the smell's checkpoint, nested
saving.join()
