"""torchpace: find and fix what slows PyTorch training.

The top-level package stays import-light (no torch): `torchpace analyze` must start fast.
Public names are re-exported lazily from their subpackages.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> subpackage that defines it; resolved on first attribute access.
_LAZY: dict[str, str] = {}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'torchpace' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
