"""The Lightning callback inside a real Trainer: a tiny model, a few CPU steps, a report and metrics."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

L = pytest.importorskip("lightning.pytorch")
from torchpace.callbacks.lightning import TorchpaceLightningCallback  # noqa: E402


class Tiny(L.LightningModule):
    """A linear classifier: the smallest thing Lightning will train."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(16, 4)

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class SlowDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Each sample takes 2 ms to read: the steps wait on the loader."""

    def __init__(self, n: int) -> None:
        self.x, self.y = torch.randn(n, 16), torch.randint(0, 4, (n,))

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(0.002)
        return self.x[i], self.y[i]


def fit(tmp_path: Path, callback: TorchpaceLightningCallback, data: Dataset, steps: int) -> None:
    trainer = L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        devices=1,
        callbacks=[callback],
        logger=L.loggers.CSVLogger(tmp_path / "logs", name="run"),
        log_every_n_steps=2,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(Tiny(), DataLoader(data, batch_size=8))


def logged(tmp_path: Path) -> list[dict[str, str]]:
    (metrics,) = (tmp_path / "logs").rglob("metrics.csv")
    with metrics.open() as f:
        return list(csv.DictReader(f))


def test_profiles_a_window_writes_the_report_and_logs_throughput(tmp_path: Path) -> None:
    callback = TorchpaceLightningCallback(
        warmup=2, steps=3, out_dir=tmp_path / "tp", report="report.json"
    )
    fit(tmp_path, callback, SlowDataset(96), steps=8)
    assert callback.report_path == tmp_path / "tp" / "report.json"
    assert (tmp_path / "tp" / "rank0.pt.trace.json").is_file()
    report = json.loads(callback.report_path.read_text())
    assert (
        report["header"]["step_source"] == "profiler-step" and report["header"]["step_count"] == 3
    )
    # A loader that sleeps 16 ms per batch of 8 while the step computes in microseconds.
    assert "dataloader-stall" in {f["rule"] for f in report["findings"]}
    rows = [r for r in logged(tmp_path) if r.get("torchpace/samples_per_s")]
    assert rows, "no torchpace figures reached the logger"
    last = rows[-1]
    assert float(last["torchpace/samples_per_s"]) > 0 and float(last["torchpace/step_ms"]) > 0
    # Measured between batches (each batch sleeps 16 ms in the loader); its size is the machine's.
    assert 0 < float(last["torchpace/data_wait_fraction"]) <= 1
    assert "torchpace/mfu" not in last or last["torchpace/mfu"] == ""  # no FLOP count given


def test_training_that_ends_inside_the_window_still_gets_its_report(tmp_path: Path) -> None:
    callback = TorchpaceLightningCallback(warmup=1, steps=50, out_dir=tmp_path, report="r.md")
    data = TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,)))
    fit(tmp_path, callback, data, steps=4)
    assert callback.report_path is not None
    text = callback.report_path.read_text()
    assert text.startswith("## torchpace report: `Tiny (Lightning), steps 2-51`")
    assert "ProfilerActivity" not in text  # the callback owns the profiler, as the doctor does


def test_bad_arguments_are_errors_at_construction() -> None:
    with pytest.raises(ValueError, match="steps must be 1 or more; got 0"):
        TorchpaceLightningCallback(steps=0)
    with pytest.raises(ValueError, match=r"unknown extension '\.pdf'"):
        TorchpaceLightningCallback(report="report.pdf")
    with pytest.raises(ValueError, match="unknown rule 'gpu-idel'"):
        TorchpaceLightningCallback(ignore=["gpu-idel"])
