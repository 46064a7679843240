"""Fixed twin: evaluation under torch.inference_mode()."""

import torch
from _common import images, mlp, take
from torch.utils.data import DataLoader

model = mlp()
model.eval()
correct = 0
with torch.inference_mode():
    for x, y in take(DataLoader(images(), batch_size=8)):
        correct += int((model(x).argmax(1) == y).sum())
