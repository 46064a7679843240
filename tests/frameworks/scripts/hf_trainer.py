"""Hugging Face Trainer: train, evaluate and predict a small model that returns its loss."""

import sys

import torch
from _data import dataset, model
from torch import nn
from transformers import Trainer, TrainingArguments


class Rows(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.rows = dataset()

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        x, y = self.rows[i]
        return {"x": x, "labels": y}


class WithLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = model()

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


args = TrainingArguments(
    output_dir=sys.argv[sys.argv.index("--root") + 1],
    num_train_epochs=2,
    per_device_train_batch_size=16,
    per_device_eval_batch_size=64,
    report_to=[],
    save_strategy="no",
    disable_tqdm=True,
    use_cpu=True,
    logging_strategy="no",
)
trainer = Trainer(model=WithLoss(), args=args, train_dataset=Rows(), eval_dataset=Rows())
trainer.train()
print("STAGE train done")
metrics = trainer.evaluate()
out = trainer.predict(Rows())
print("STAGE predict done", out.predictions.shape[0], "eval_loss" in metrics)
