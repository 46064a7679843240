"""blocking-checkpoint's fix runs as given on a checkpoint as scripts nest it."""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from torchpace.doctor.rules.blocking_checkpoint import FIX


def test_the_fix_saves_a_nested_checkpoint_from_a_copy(tmp_path: Path) -> None:
    """torchvision's classification reference saves {"model": ..., "optimizer": ..., "args": ...}:
    the fix's first version copied only the top level's values (`dict.detach` raised)."""
    namespace: dict[str, object] = {"torch": torch}
    exec(FIX, namespace)  # the code the report tells the user to paste
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
             "extra": [torch.ones(2), (torch.zeros(1), "tag")]}  # fmt: skip
    before = model.weight.detach().clone()
    path = tmp_path / "checkpoint.pth"
    thread = namespace["save_in_background"](state, str(path))  # type: ignore[operator]
    assert isinstance(thread, threading.Thread)
    with torch.no_grad():
        model.weight.add_(1.0)  # the loop goes on (the state_dict's tensors share its storage)
    thread.join()
    saved = torch.load(path, weights_only=True)
    assert torch.equal(saved["model"]["weight"], before)  # the copy, not the changed weights
    assert saved["epoch"] == 3 and saved["optimizer"]["param_groups"][0]["momentum"] == 0.9
    assert torch.equal(saved["extra"][0], torch.ones(2)) and saved["extra"][1][1] == "tag"
