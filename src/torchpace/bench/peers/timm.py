"""Peer: the vision workload fed by timm's PrefetchLoader (uint8 batches, normalised on the device)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import torch

from torchpace.bench import _train
from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.loader import make_loader
from torchpace.bench.loop import Measurement, backend_flags, timed
from torchpace.bench.memory import PeakMemory
from torchpace.bench.workloads.base import Batch, Workload


class TimmPeer:
    """timm.data.loader.PrefetchLoader around the same DataLoader: its side-stream copy against torchpace's."""

    name = "timm"

    def available(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """timm must import (it needs a torchvision built for this torch), on CUDA, for image workloads."""
        if workload.name != "vision":
            return (
                False,
                f"timm's prefetch loader is for image classification, not the {workload.name} workload",
            )
        if device.type != "cuda":
            return (
                False,
                "timm's PrefetchLoader overlaps host-to-device copies; there are none on CPU",
            )
        try:
            import timm
        except ImportError:
            return False, "timm is not installed (pip install timm to compare with it)"
        except Exception as exc:  # e.g. a torchvision wheel built for another torch
            return False, f"timm does not import: {type(exc).__name__}: {exc}"
        try:
            prefetch_loader()
        except Exception as exc:
            version = getattr(timm, "__version__", "?")
            return False, f"timm {version} has no PrefetchLoader where torchpace looks: {exc}"
        return True, ""

    def run(
        self, workload: Workload, config: RunConfig, settings: BenchSettings, device: torch.device
    ) -> Measurement:
        """The harness's loop with timm's PrefetchLoader as the input pipeline (normalisation stays on the host)."""
        loader_class = prefetch_loader()
        memory = PeakMemory(device)
        with backend_flags(config):
            torch.manual_seed(settings.seed)
            model = _train.prepare_model(workload.build_model(), config, settings, device)
            step = _train.make_step(
                model, workload.make_optimizer(model.parameters()), workload.loss, config, device
            )
            # timm scales mean/std by 255 for uint8 images; our dataset already normalises on the host,
            # so mean 0 and std 1/255 make its on-device normalisation the identity.
            loader = loader_class(
                make_loader(workload, config, settings.seed),
                mean=(0.0,) * 3,
                std=(1.0 / 255,) * 3,
                device=device,
            )
            was_reset = memory.reset()
            # The harness's timed loop; the peer logs its losses without a sync, as timm does.
            logged = replace(config, sync_free_logging=True)
            result = timed(step, _batches(loader), logged, settings, device)
        return Measurement(
            **result, peak_memory_bytes=memory.read(), peak_memory_kind=memory.kind(was_reset)
        )


def prefetch_loader() -> type:
    """timm's PrefetchLoader. It lives in timm.data.loader: timm.data exports create_loader, not
    the class (from timm.data it failed to import on the H200, and in every tagged timm)."""
    from timm.data.loader import PrefetchLoader

    return PrefetchLoader  # type: ignore[no-any-return]


def _batches(loader: Any) -> Iterator[tuple[Batch, int]]:
    """timm's loader as the harness's stream of (batch, samples), epoch after epoch."""
    epoch = 0
    while True:
        for inputs, targets in loader:
            yield (inputs, targets), int(inputs.shape[0])
        epoch += 1
        loader.loader.batch_sampler.set_epoch(epoch)


PEER = TimmPeer()
