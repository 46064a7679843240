"""Peer: the same workload under Lightning's Trainer, with the flags that match torchpace's recipe."""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

import torch

from torchpace.bench import _train
from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.loader import make_loader
from torchpace.bench.loop import Clock, Measurement, backend_flags, sync
from torchpace.bench.memory import PeakMemory
from torchpace.bench.workloads.base import Workload

PRECISION = {"off": "32-true", "bf16": "bf16-mixed", "fp16": "16-mixed"}


class LightningPeer:
    """Trainer(precision=..., benchmark=...) on the same DataLoader settings, model init and data order."""

    name = "lightning"

    def available(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Lightning must import; it is not a torchpace dependency."""
        try:
            import lightning.pytorch  # noqa: F401
        except ImportError:
            return False, "lightning is not installed (pip install lightning to compare with it)"
        except Exception as exc:  # a broken install: say what broke, do not crash the bench
            return False, f"lightning does not import: {type(exc).__name__}: {exc}"
        return True, ""

    def run(
        self, workload: Workload, config: RunConfig, settings: BenchSettings, device: torch.device
    ) -> Measurement:
        """Fit warmup + steps with a Trainer and time it with a callback, like the harness times its loop."""
        import lightning.pytorch as pl

        # Lightning logs its set-up at INFO on every fit: keep the bench's stderr for progress.
        logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
        total = settings.warmup + settings.steps
        timer = _timer_class(pl)(workload, settings, device)
        memory = PeakMemory(device)
        with backend_flags(config):
            torch.manual_seed(settings.seed)
            model = _train.prepare_model(workload.build_model(), config, settings, device)
            module = _module_class(pl)(model, workload, config, timer)
            trainer = pl.Trainer(
                accelerator="gpu" if device.type == "cuda" else "cpu",
                devices=1,
                precision=PRECISION[config.amp],  # type: ignore[arg-type]
                benchmark=config.cudnn_benchmark,
                max_steps=total,
                logger=False,
                enable_checkpointing=False,
                enable_progress_bar=False,
                enable_model_summary=False,
                num_sanity_val_steps=0,
                use_distributed_sampler=False,
                callbacks=[timer],
            )
            was_reset = memory.reset()
            timer.start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                trainer.fit(module, make_loader(workload, config, settings.seed))
            sync(device)
        return timer.measurement(memory.read(), memory.kind(was_reset))


def _module_class(pl: Any) -> type:
    class BenchModule(pl.LightningModule):  # type: ignore[misc,name-defined]
        """The workload's model and loss as a LightningModule."""

        def __init__(
            self, model: torch.nn.Module, workload: Workload, config: RunConfig, timer: Any
        ) -> None:
            super().__init__()
            self.model, self.workload, self.config, self.timer = model, workload, config, timer

        def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
            # Counted on the host before the copy, as the harness does: no device sync.
            self.timer.units_next = self.workload.count_units(batch)
            return batch

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            inputs, targets = _train.layout(batch, self.config)
            return self.workload.loss(self.model(inputs), targets)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return self.workload.make_optimizer(self.model.parameters())

    return BenchModule


# long: one class, its hooks in Lightning's order; made here, not at module level, because its
# base, pl.Callback, exists only once the optional Lightning imports.
def _timer_class(pl: Any) -> type:
    class Timer(pl.Callback):  # type: ignore[misc,name-defined]
        """Step boundaries, data wait (time between a step's end and the next one's start) and losses."""

        def __init__(
            self, workload: Workload, settings: BenchSettings, device: torch.device
        ) -> None:
            self.settings, self.device = settings, device
            self.clock = Clock(device)
            self.start = self.window_start = self.last_end = 0.0
            self.first_step_ms = self.wait_s = 0.0
            self.units = self.units_next = self.count = 0
            self.losses: list[torch.Tensor] = []

        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            # Lightning sets the epoch on a sampler, not on a batch sampler: do it so every epoch's
            # order matches the harness's.
            sampler = trainer.train_dataloader.batch_sampler
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(trainer.current_epoch)

        def on_train_batch_start(
            self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
        ) -> None:
            now = time.perf_counter()
            if self.count == self.settings.warmup:
                sync(self.device)
                now = self.window_start = time.perf_counter()
                self.clock.mark()
            elif self.count > self.settings.warmup:
                self.wait_s += now - self.last_end

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            self.losses.append(outputs["loss"].detach())
            if self.count == 0:
                sync(self.device)
                self.first_step_ms = (time.perf_counter() - self.start) * 1000.0
            if self.count >= self.settings.warmup:
                self.clock.mark()
                self.units += self.units_next
            self.count += 1
            self.last_end = time.perf_counter()

        def measurement(self, peak: int, kind: str) -> Measurement:
            wall = time.perf_counter() - self.window_start
            return Measurement(
                units_per_s=self.units / wall,
                step_ms=self.clock.intervals_ms(),
                data_wait_fraction=min(1.0, self.wait_s / wall),
                peak_memory_bytes=peak,
                peak_memory_kind=kind,
                first_step_ms=self.first_step_ms,
                losses=[float(x) for x in self.losses],
                steps=self.settings.steps,
                units=self.units,
            )

    return Timer


PEER = LightningPeer()
