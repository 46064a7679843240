"""Not a smell: the same decoding, then a random flip per read; caching would freeze the flip."""

import torch
from repeated_decode import Encoded, train


class Augmented(Encoded):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = self.decode(i)
        return (x.flip(-1) if torch.rand(()) < 0.5 else x), i % 10


train(Augmented())
