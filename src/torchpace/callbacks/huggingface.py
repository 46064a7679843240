"""torchpace inside a Hugging Face Trainer: profile a window of steps and add throughput to its logs.

    from torchpace.callbacks.huggingface import TorchpaceTrainerCallback

    trainer = Trainer(model=model, args=args, train_dataset=data)
    TorchpaceTrainerCallback(warmup=5, steps=10).install(trainer)
    trainer.train()

After `warmup` optimizer steps it profiles the next `steps` and writes the torchpace report (and the
trace) to `out_dir`. Every time the Trainer logs, it adds `torchpace/samples_per_s`, `tokens_per_s`
(when the Trainer counts input tokens: include_num_input_tokens_seen), the data-wait share, step
time and, given `flops_per_step`, MFU. The Trainer hands logs to its callbacks in order and puts
the reporting integrations (TensorBoard, W&B, ...) first: `install()` puts this callback ahead of
them so they receive the figures; passed in `callbacks=[...]`, only the log history and the
callbacks after it see them. Needs `transformers`.
"""

from __future__ import annotations

from typing import Any

from torchpace.callbacks.window import WindowCallback, metrics

try:
    from transformers import TrainerCallback
except ImportError:
    raise ImportError(
        "torchpace.callbacks.huggingface needs transformers: pip install transformers"
    ) from None


class TorchpaceTrainerCallback(WindowCallback, TrainerCallback):  # type: ignore[misc]
    """Profile optimizer steps `warmup + 1` to `warmup + steps`, write the report, log throughput.

    Takes WindowCallback's keyword arguments (warmup, steps, report, out_dir, flops_per_step,
    only, ignore, thresholds)."""

    _tokens_seen = 0  # input tokens the Trainer had counted at the last step

    def install(self, trainer: Any) -> TorchpaceTrainerCallback:
        """Put this callback first among `trainer`'s, so the reporters log its figures."""
        callbacks = trainer.callback_handler.callbacks
        if self in callbacks:
            callbacks.remove(self)
        callbacks.insert(0, self)
        return self

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Start the meter on the Trainer's device; open the window if there is no warm-up."""
        self._tokens_seen = state.num_input_tokens_seen
        model = kwargs.get("model")
        name = type(model).__name__ if model is not None else "model"
        title = f"{name} (Hugging Face Trainer)"
        self._begin(
            args.device, title, "optimizer steps", args.process_index, state.is_world_process_zero
        )

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The step's batches were fetched just before this: that gap was the data wait."""
        self._wait_ends()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Count the optimizer step (all its micro-batches) and move the profiled window on."""
        if self.meter is None:
            return
        tokens = state.num_input_tokens_seen - self._tokens_seen
        self._tokens_seen = state.num_input_tokens_seen
        samples = args.train_batch_size * args.gradient_accumulation_steps
        self.meter.step(samples=samples, tokens=tokens if tokens > 0 else None)
        if self.window.step_end():  # profiled steps are slower: figures describe the others
            self.meter.restart()
        self._wait_begins()

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        """Add the figures to a training log (and to its entry in the log history)."""
        self._restart_wait()
        if self.meter is None or logs is None or any(k.startswith("eval_") for k in logs):
            return
        if self.window.active:  # profiled steps carry the profiler's overhead
            return
        figures = metrics(self.meter.stats())
        logs.update(figures)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(figures)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Evaluation between steps is not data wait."""
        self._restart_wait()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Saving a checkpoint between steps is not data wait."""
        self._restart_wait()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """A window cut short by the end of training still gets its report."""
        self.window.finish()

    def _restart_wait(self) -> None:
        if self._free_since is not None:
            self._wait_begins()
