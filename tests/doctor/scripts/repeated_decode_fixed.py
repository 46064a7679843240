"""Fixed twin: each image decoded and resized once, before training; epochs read memory."""

import torch
from repeated_decode import Encoded, train
from torch.utils.data import TensorDataset

encoded = Encoded()
images = torch.stack([encoded.decode(i) for i in range(len(encoded))])  # once
train(TensorDataset(images, torch.arange(len(encoded)) % 10))
