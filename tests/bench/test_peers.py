"""Peers: skipped with the reason when their library is missing; run side by side when installed."""

from __future__ import annotations

import sys

import pytest
import torch

from torchpace.bench import peers
from torchpace.bench.harness import plan, run_bench
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
