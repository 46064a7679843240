"""Lightning's ddp_spawn on the CPU: two processes started with torch.multiprocessing, joined by
Lightning itself, rank 0's results sent back on a queue (runner/spawned.py doctors each)."""

import sys

import lightning as L
import torch
from _data import dataset, model
from torch.utils.data import DataLoader


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = model()

    def training_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=2,
        strategy="ddp_spawn",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=sys.argv[sys.argv.index("--root") + 1],
    )
    trainer.fit(Classifier(), DataLoader(dataset(), batch_size=16, shuffle=True))
    print("STAGE spawn done", sorted(trainer.callback_metrics))
