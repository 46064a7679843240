"""Lightning's fit: its validation sanity check (2 validation batches, before the first training
batch), then 2 epochs of 8 training batches, each validated at its end (4 batches)."""

import lightning as L
import torch
from _common import images, mlp
from torch.utils.data import DataLoader


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()

    def training_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        num_sanity_val_steps=2,
    )
    trainer.fit(
        Classifier(),
        DataLoader(images(128), batch_size=16),
        DataLoader(images(64), batch_size=16),
    )
