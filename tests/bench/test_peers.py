"""Peers: skipped with the reason when their library is missing; run side by side when installed."""

from __future__ import annotations

import math
import sys
import types

import pytest
import torch

from torchpace.bench import peers
from torchpace.bench._train import prepare_model
from torchpace.bench.config import RunConfig
from torchpace.bench.harness import plan, run_bench
from torchpace.bench.loop import backend_flags
from torchpace.bench.peers import timm as timm_peer
from torchpace.bench.peers.timm import prefetch_loader
from torchpace.bench.techniques import get_technique
from torchpace.bench.workloads import get_workload

from .conftest import CPU, tiny_settings


def test_missing_lightning_is_skipped_with_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        sys.modules, "lightning", None
    )  # makes `import lightning` raise ImportError
    workload = get_workload("vision", "tiny")
    settings = tiny_settings(peers=True)
    rows, _ = plan(workload, CPU, settings)
    planned, skipped = peers.plan(workload, CPU, settings, rows)
    assert planned == []
    reasons = {s.name: s.reason for s in skipped}
    assert (
        reasons["peer: lightning"]
        == "lightning is not installed (pip install lightning to compare with it)"
    )
    assert (
        reasons["peer: timm"]
        == "timm's PrefetchLoader overlaps host-to-device copies; there are none on CPU"
    )


def test_timm_peer_is_for_images_only() -> None:
    ok, reason = peers.all_peers()[1].available(get_workload("text", "tiny"), torch.device("cuda"))
    assert (
        not ok
        and reason == "timm's prefetch loader is for image classification, not the text workload"
    )


def test_no_peers_unless_asked() -> None:
    workload = get_workload("vision", "tiny")
    rows, _ = plan(workload, CPU, tiny_settings())
    assert peers.plan(workload, CPU, tiny_settings(), rows) == ([], [])


def test_lightning_peer_matches_the_recipe_side_by_side() -> None:
    pytest.importorskip("lightning.pytorch")
    result = run_bench(
        get_workload("vision", "tiny"),
        CPU,
        tiny_settings(peers=True, ceiling=False, steps=3, warmup=1),
        [get_technique("workers"), get_technique("channels-last")],
    )
    peer = result.config("peer: lightning")
    assert peer.compared_with == "+ channels-last" and peer.ratio is not None and peer.ratio > 0
    # The same init, data and order through Lightning's loop: the same math.
    assert peer.parity.status == "same", peer.parity


def test_tf32_leaves_the_matmul_precision_readable_by_lightning() -> None:
    # Lightning reads the legacy torch.get_float32_matmul_precision() on every CUDA fit; on an
    # H200 it raised ("mix of the legacy and new APIs") after the bench set TF32 through
    # torch.backends.cuda.matmul.fp32_precision alone, and the Lightning peer failed.
    before = torch.get_float32_matmul_precision()
    config = RunConfig(tf32=True)
    with backend_flags(config):
        assert torch.get_float32_matmul_precision() == "highest"  # the naive baseline's
        prepare_model(torch.nn.Linear(4, 4), config, tiny_settings(), CPU)
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
        assert torch.backends.cudnn.allow_tf32  # conv and RNN agree: the legacy getter reads
    assert torch.get_float32_matmul_precision() == before


def test_timm_peer_takes_prefetch_loader_from_timm_data_loader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # timm.data exports create_loader, not PrefetchLoader: the H200's timm raised "cannot import
    # name 'PrefetchLoader' from 'timm.data'". A stand-in timm laid out like timm 1.0.
    class PrefetchLoader:
        pass

    timm, data, loader = (types.ModuleType(n) for n in ("timm", "timm.data", "timm.data.loader"))
    timm.__version__ = "1.0.0"  # type: ignore[attr-defined]
    loader.PrefetchLoader = PrefetchLoader  # type: ignore[attr-defined]
    for module in (timm, data, loader):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    peer, vision, cuda = peers.all_peers()[1], get_workload("vision", "tiny"), torch.device("cuda")
    assert peer.available(vision, cuda) == (True, "")
    assert prefetch_loader() is PrefetchLoader
    del loader.PrefetchLoader  # type: ignore[attr-defined]
    ok, reason = peer.available(vision, cuda)
    assert not ok and reason.startswith("timm 1.0.0 has no PrefetchLoader where torchpace looks: ")


def test_timm_peer_runs_the_harness_loop_across_epochs(monkeypatch: pytest.MonkeyPatch) -> None:
    # timm's PrefetchLoader copies each batch to the device and normalises it there (CUDA only);
    # a stand-in that passes the batches through runs the peer's loop on the CPU.
    class PrefetchLoader:
        def __init__(self, loader: object, **_: object) -> None:
            self.loader = loader

        def __iter__(self) -> object:
            return iter(self.loader)  # type: ignore[call-overload]

    monkeypatch.setattr(timm_peer, "prefetch_loader", lambda: PrefetchLoader)
    vision = get_workload("vision", "tiny")  # 3 batches of 8 per epoch
    measured = timm_peer.PEER.run(vision, RunConfig(), tiny_settings(steps=4), CPU)  # 1 + 4 steps
    assert (measured.steps, measured.units, measured.step_units) == (4, 32, [8, 8, 8, 8])
    assert len(measured.losses) == 5 and all(math.isfinite(x) for x in measured.losses)
