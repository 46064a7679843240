"""Small models and data for the train tests; everything runs on the CPU in milliseconds."""

from __future__ import annotations

import pytest
import torch
from train_helpers import TinyNet


@pytest.fixture
def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 8, generator=g), torch.randint(0, 3, (8,), generator=g)


@pytest.fixture
def tiny() -> TinyNet:
    torch.manual_seed(0)
    return TinyNet()
