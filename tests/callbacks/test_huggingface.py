"""The Hugging Face callback inside a real Trainer: a tiny GPT-2 made from a config (nothing is
downloaded), a few CPU steps, a report, and throughput figures in the Trainer's logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import Dataset

transformers = pytest.importorskip("transformers")
from torchpace.callbacks.huggingface import TorchpaceTrainerCallback  # noqa: E402


class Tokens(Dataset[dict[str, torch.Tensor]]):
    """Random token sequences with their labels (causal LM: labels are the inputs)."""

    def __init__(self, n: int, length: int = 16, vocab: int = 64) -> None:
        self.ids = torch.randint(0, vocab, (n, length), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Recorder(transformers.TrainerCallback):  # type: ignore[misc]
    """What a reporting integration (TensorBoard, W&B) would receive."""

    def __init__(self) -> None:
        self.logs: list[dict[str, Any]] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        self.logs.append(dict(logs or {}))


def trainer(tmp_path: Path, callbacks: list[Any], steps: int) -> Any:
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        max_steps=steps,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        logging_steps=2,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        include_num_input_tokens_seen=True,
    )
    model = transformers.GPT2LMHeadModel(config)
    return transformers.Trainer(
        model=model, args=args, train_dataset=Tokens(96), callbacks=callbacks
    )


def test_profiles_a_window_writes_the_report_and_logs_throughput(tmp_path: Path) -> None:
    recorder = Recorder()  # passed in `callbacks`: after the defaults, before ours once installed
    callback = TorchpaceTrainerCallback(warmup=2, steps=3, out_dir=tmp_path / "tp", report="r.json")
    run = trainer(tmp_path, [recorder], steps=9)
    callback.install(run)
    assert run.callback_handler.callbacks[0] is callback
    run.train()
    assert callback.report_path == tmp_path / "tp" / "r.json"
    report = json.loads(callback.report_path.read_text())
    assert (
        report["header"]["step_source"] == "profiler-step" and report["header"]["step_count"] == 3
    )
    assert report["breakdown"]["median_step_ms"] > 0
    figures = [log for log in recorder.logs if "torchpace/samples_per_s" in log]
    assert figures, "no torchpace figures reached the other callbacks"
    last = figures[-1]
    assert last["torchpace/samples_per_s"] > 0
    # 2 micro-batches of 4 sequences of 16 tokens per optimizer step: tokens/s = 16 x samples/s.
    assert last["torchpace/tokens_per_s"] == pytest.approx(16 * last["torchpace/samples_per_s"])
    assert 0 <= last["torchpace/data_wait_fraction"] <= 1
    history = [h for h in run.state.log_history if "torchpace/samples_per_s" in h]
    assert history and history[-1]["torchpace/samples_per_s"] == last["torchpace/samples_per_s"]


def test_training_that_ends_inside_the_window_still_gets_its_report(tmp_path: Path) -> None:
    callback = TorchpaceTrainerCallback(warmup=0, steps=50, out_dir=tmp_path, report="r.md")
    trainer(tmp_path, [callback], steps=3).train()
    assert callback.report_path is not None
    text = callback.report_path.read_text()
    assert text.startswith("## torchpace report: `GPT2LMHeadModel (Hugging Face Trainer)")
