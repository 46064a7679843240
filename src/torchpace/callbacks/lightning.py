"""torchpace inside a Lightning Trainer: profile a window of steps and feed throughput to its logger.

    from torchpace.callbacks.lightning import TorchpaceLightningCallback

    trainer = L.Trainer(callbacks=[TorchpaceLightningCallback(warmup=5, steps=10)])

After `warmup` training steps it profiles the next `steps` and writes the torchpace report (and the
trace) to `out_dir`; every `log_every_n_steps` it logs samples/s, tokens/s, the data-wait share,
step time and, given `flops_per_step`, MFU (as `torchpace/...`) through `LightningModule.log_dict`,
so every logger the Trainer has receives them. Needs `lightning` (or `pytorch_lightning`).
"""

from __future__ import annotations

from typing import Any

from torchpace.callbacks.window import WindowCallback, count_batch, metrics

try:
    from lightning.pytorch import Callback
except ImportError:  # the older package name
    try:
        from pytorch_lightning import Callback  # type: ignore[assignment]
    except ImportError:
        raise ImportError(
            "torchpace.callbacks.lightning needs Lightning: pip install lightning"
        ) from None


class TorchpaceLightningCallback(WindowCallback, Callback):  # type: ignore[misc]
    """Profile steps `warmup + 1` to `warmup + steps`, write the report, log the throughput.

    Takes WindowCallback's keyword arguments (warmup, steps, report, out_dir, flops_per_step,
    only, ignore, thresholds)."""

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Start the meter on the module's device; open the window if there is no warm-up."""
        title = f"{type(pl_module).__name__} (Lightning)"
        self._begin(pl_module.device, title, "steps", trainer.global_rank, trainer.is_global_zero)

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        """Count the time since the last batch ended as waiting for this one."""
        self._wait_ends()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Count the step, move the profiled window on, and log the figures now and then."""
        if self.meter is None:
            return
        samples, tokens = count_batch(batch)
        self.meter.step(samples=samples, tokens=tokens)
        if self.window.step_end():  # profiled steps are slower: figures describe the others
            self.meter.restart()
        every = max(1, int(getattr(trainer, "log_every_n_steps", 50)))
        if self.meter.total_steps % every == 0 and not self.window.active:
            # Reading the stats syncs once for device token counts: only when logging.
            figures = metrics(self.meter.stats())
            if figures:
                pl_module.log_dict(figures, on_step=True, on_epoch=False, batch_size=1)
        self._wait_begins()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        """Validation inside an epoch is not data wait: the gap restarts after it."""
        self._wait_begins()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        """A window cut short by the end of training still gets its report."""
        self.window.finish()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """The run failed: keep what was profiled."""
        self.window.finish()
