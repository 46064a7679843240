"""What holds memory: the categories the memory census names each live tensor by, and the memory
view and the out-of-memory explanation split a peak into, in the order the report lists them."""

from __future__ import annotations

from typing import Literal

Category = Literal[
    "parameters", "gradients", "optimizer state", "buffers", "activations", "temporaries", "other"
]
# "temporaries": made in the step outside forward, alive at its peak (the memory view's);
# "other": any other tensor alive (the batch, a dataset held in memory, caches).
CATEGORIES: tuple[Category, ...] = (
    "parameters",
    "gradients",
    "optimizer state",
    "buffers",
    "activations",
    "temporaries",
    "other",
)
