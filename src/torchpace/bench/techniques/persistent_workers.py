"""`persistent-workers`: keep worker processes alive between epochs."""

from __future__ import annotations

from torchpace.bench.technique import Technique


class PersistentWorkers(Technique):
    """Start workers once, not at every epoch (each restart re-imports and re-pickles the dataset)."""

    name = "persistent-workers"
    summary = "persistent_workers=True: no worker start-up at each epoch"
    requires = ("workers",)
    option = "persistent_workers"


TECHNIQUE = PersistentWorkers()
