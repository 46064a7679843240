"""Peers measured in the same run: the same workload under other libraries' matching set-ups."""

from __future__ import annotations

import dataclasses
import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from torchpace.bench import parity
from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.loop import Measurement
from torchpace.bench.results import ConfigResult, Skipped, summarise
from torchpace.bench.technique import Planned
from torchpace.bench.workloads.base import Workload
from torchpace.measure import Measured


class Peer(Protocol):
    """A peer set-up: where it applies and how to run a configuration under it."""

    name: str

    def available(self, workload: Workload, device: torch.device) -> tuple[bool, str]:
        """Whether it can run here, and if not, why."""
        ...

    def run(
        self, workload: Workload, config: RunConfig, settings: BenchSettings, device: torch.device
    ) -> Measurement:
        """Train warmup + steps with this peer and measure like the harness does."""
        ...


@dataclass(frozen=True)
class PeerRow:
    """A peer configuration matched to the torchpace row it is compared with."""

    name: str
    compared_with: Planned
    runner: Callable[[], Measurement]


def all_peers() -> list[Peer]:
    """Every known peer."""
    from torchpace.bench.peers import lightning, timm

    return [lightning.PEER, timm.PEER]


def plan(
    workload: Workload, device: torch.device, settings: BenchSettings, rows: Sequence[Planned]
) -> tuple[list[PeerRow], list[Skipped]]:
    """Each available peer on the full recipe's flags; unavailable ones skipped with the reason."""
    if not settings.peers:
        return [], []
    target = next((r for r in reversed(rows) if r.kind == "cumulative"), rows[0])
    planned: list[PeerRow] = []
    skipped: list[Skipped] = []
    for peer in all_peers():
        ok, reason = peer.available(workload, device)
        if not ok:
            skipped.append(Skipped(f"peer: {peer.name}", reason))
            continue
        planned.append(
            PeerRow(
                f"peer: {peer.name}",
                target,
                _runner(peer, workload, target.config, settings, device),
            )
        )
    return planned, skipped


def _runner(
    peer: Peer, workload: Workload, config: RunConfig, settings: BenchSettings, device: torch.device
) -> Callable[[], Measurement]:
    return lambda: peer.run(workload, config, settings, device)


def summarise_rows(
    rows: Sequence[PeerRow],
    measured: Measured,
    configs: Sequence[ConfigResult],
    baseline_losses: Sequence[float],
) -> list[ConfigResult]:
    """Peer results, each with its ratio to the torchpace configuration it matches (>1: torchpace faster)."""
    out: list[ConfigResult] = []
    by_name = {c.name: c for c in configs}
    measured_names = {a.name for a in measured.arms}
    for row in rows:
        ours = by_name.get(row.compared_with.name)
        if row.name not in measured_names or ours is None:
            continue
        arm = measured.arm(row.name)
        losses = arm.runs[0].timed.payload.losses
        check = parity.compare(baseline_losses, losses, row.compared_with.techniques)
        names = [t.name for t in row.compared_with.techniques]
        result = summarise(row.name, "peer", names, row.compared_with.config.changes(), arm, check)
        ratio = ours.units_per_s / result.units_per_s if result.units_per_s else None
        out.append(dataclasses.replace(result, compared_with=ours.name, ratio=ratio))
    return out


def versions() -> dict[str, str]:
    """Installed versions of the peers' libraries (whether or not they import)."""
    found = {}
    for dist in ("lightning", "timm"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found
