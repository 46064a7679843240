"""pytorch-ignite: a supervised trainer with an evaluator run after each epoch."""

import torch
from _data import dataset, model
from ignite.engine import Events, create_supervised_evaluator, create_supervised_trainer
from ignite.metrics import Accuracy, Loss
from torch.utils.data import DataLoader

net = model()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
trainer = create_supervised_trainer(net, opt, loss_fn)
evaluator = create_supervised_evaluator(
    net, metrics={"accuracy": Accuracy(), "loss": Loss(loss_fn)}
)
train = DataLoader(dataset(), batch_size=16, shuffle=True)
val = DataLoader(dataset(), batch_size=64)


@trainer.on(Events.EPOCH_COMPLETED)
def validate(engine) -> None:  # type: ignore[no-untyped-def]
    evaluator.run(val)


trainer.run(train, max_epochs=3)
print("STAGE ignite done", sorted(evaluator.state.metrics))
