"""The shared decisions: each answered once, and every user gets the same answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpace.bench.config import BenchSettings
from torchpace.data import loaders
from torchpace.data.prefetch import DevicePrefetcher
from torchpace.fixes.policy import target
from torchpace.fixes.workers import Host
from torchpace.measure import Settings
from torchpace.monitor.throughput import Throughput
from torchpace.policy.devices import default_device, device, is_accelerator, is_cuda
from torchpace.policy.threads import cores_per_process, local_ranks
from torchpace.policy.window import check_window
from torchpace.runner.options import DoctorOptions
from torchpace.verify.run import VerifyOptions


def test_device_kinds() -> None:
    assert [is_accelerator(k) for k in ("cuda", "rocm", "mps", "cpu", "xpu", None)] == [
        True, True, True, False, False, False,
    ]  # fmt: skip
    assert [is_cuda(k) for k in ("cuda", "rocm", "mps", "cpu")] == [True, True, False, False]
    assert (device("rocm"), device("xpu"), device(None)) == ("rocm", "unknown", "unknown")
    assert target("mps").accelerator and Host(device="mps").accelerator
    assert target("rocm").torch_device == "cuda" and not target("cpu").accelerator


def test_every_user_trains_on_the_same_default_device(monkeypatch: pytest.MonkeyPatch) -> None:
    # Precision once chose the CPU where the prefetcher chose an MPS or XPU accelerator.
    import torch

    from torchpace.train.precision import Precision

    assert default_device() == torch.device("cpu")  # the test machine has no accelerator
    meta = torch.device("meta")  # a stand-in accelerator that every torch build has
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: meta)
    assert default_device() == meta and loaders.has_accelerator()
    users = (Precision("fp32"), Throughput(), DevicePrefetcher([]))
    assert [u.device for u in users] == [meta] * 3


def test_threads_share_the_cores_among_the_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [cores_per_process(16, n) for n in (1, 2, 3, 32)] == [16, 8, 5, 1]
    assert Host(cores=16, local_ranks=3).share == cores_per_process(16, 3)
    # Three readers of torchrun's LOCAL_WORLD_SIZE once disagreed on a bad value (one raised).
    for value, ranks in (("4", 4), ("0", 1), ("two", 1)):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", value)
        assert local_ranks() == ranks
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert local_ranks() == 1


@pytest.mark.parametrize(
    ("warmup", "steps", "message"),
    [(-1, 5, "warmup must be 0 or more; got -1"), (0, 0, "steps must be 1 or more; got 0")],
)
def test_every_window_is_checked_alike(
    tmp_path: Path, warmup: int, steps: int, message: str
) -> None:
    # The doctor's and --verify's options once took any window from the Python API.
    with pytest.raises(ValueError, match=f"^--{message}$"):
        check_window(warmup, steps, prefix="--")
    for make in (
        lambda: DoctorOptions(out_dir=tmp_path, warmup=warmup, steps=steps),
        lambda: VerifyOptions(warmup=warmup, steps=steps),
        lambda: Settings(warmup=warmup, steps=steps),
        lambda: BenchSettings(warmup=warmup, steps=steps),
    ):
        with pytest.raises(ValueError, match=f"^{message}$"):
            make()
