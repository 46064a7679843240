"""TF32 set through torch >= 2.9's per-backend API, as PyTorch's docs now advise (CPU runnable)."""

import torch
from _common import images, mlp, take
from torch.utils.data import DataLoader

torch.backends.cuda.matmul.fp32_precision = "tf32"
torch.backends.cudnn.conv.fp32_precision = "tf32"
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in take(DataLoader(images(), batch_size=8, drop_last=True)):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
