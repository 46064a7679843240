"""Lightning: fit, validate, test, then predict from the best checkpoint, with a DataModule
(`--profiler` adds Lightning's own torch.profiler: the doctor steps aside)."""

import sys

import lightning as L
import torch
from _data import dataset, model
from torch.utils.data import DataLoader


class Data(L.LightningDataModule):
    def setup(self, stage: str | None = None) -> None:
        self.rows = dataset()

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.rows, batch_size=16, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.rows, batch_size=64)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.rows, batch_size=64)

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(self.rows, batch_size=64)


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = model()

    def training_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def test_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        self.log("test_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def predict_step(self, batch, i):  # type: ignore[no-untyped-def]
        return self.net(batch[0]).argmax(1)

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        profiler="pytorch" if "--profiler" in sys.argv else None,
        default_root_dir=sys.argv[sys.argv.index("--root") + 1],
    )
    data, net = Data(), Classifier()
    trainer.fit(net, datamodule=data)
    print("STAGE fit done")
    trainer.validate(net, datamodule=data, verbose=False)
    trainer.test(net, datamodule=data, verbose=False)
    predicted = trainer.predict(ckpt_path="best", datamodule=data)
    print("STAGE predict done", sum(len(p) for p in predicted))
