"""`persistent-workers`: keep worker processes alive between epochs."""

from __future__ import annotations

import dataclasses

from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.technique import Technique


class PersistentWorkers(Technique):
    """Start workers once, not at every epoch (each restart re-imports and re-pickles the dataset)."""

    name = "persistent-workers"
    summary = "persistent_workers=True: no worker start-up at each epoch"
    requires = ("workers",)

    def apply(self, config: RunConfig, settings: BenchSettings) -> RunConfig:
        """Keep the loader's workers alive across epochs."""
        return dataclasses.replace(config, persistent_workers=True)


TECHNIQUE = PersistentWorkers()
