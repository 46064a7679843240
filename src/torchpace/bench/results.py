"""The bench's results as data: environment, one record per configuration, JSON lines in and out."""

from __future__ import annotations

import datetime
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec
import torch

from torchpace.bench.config import Kind
from torchpace.bench.loop import Measurement
from torchpace.cores import usable_cores
from torchpace.environment.probe import cpu_model
from torchpace.measure import ArmResult, LoadSummary, Verdict
from torchpace.trace.stats import median

# 2: speedups come from the measurement core with a 95% interval, a verdict and flags; the
# machine's load is recorded.
SCHEMA_VERSION = 2
ParityStatus = Literal["baseline", "same", "within-tolerance", "differs", "not-comparable"]


@dataclass(frozen=True)
class Environment:
    """Where the numbers come from: a speedup means nothing without it."""

    device: str
    device_name: str
    torch: str
    cuda: str | None
    cudnn: int | None
    cores: int
    cpu: str
    python: str
    platform: str
    torchpace: str
    date: str
    peers: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        """One line for headers: device, torch, CUDA, cores."""
        cuda = f"CUDA {self.cuda}" if self.cuda else "no CUDA"
        return (
            f"{self.device} ({self.device_name}) · torch {self.torch} · {cuda} · "
            f"{self.cores} cores · {self.date}"
        )


@dataclass(frozen=True)
class Parity:
    """How the configuration's per-step losses compare with the baseline's (same seed, same data)."""

    status: ParityStatus
    max_rel_diff: float | None
    rtol: float
    note: str = ""


@dataclass(frozen=True)
class ConfigResult:
    """One configuration, measured over every repeat (medians; spreads over repeats).

    `speedup` is the baseline's median time per unit (sample, token) over this configuration's,
    paired with the baseline runs beside it (torchpace.measure); `speedup_low`-`speedup_high` is
    its 95% interval and `verdict` says whether the change is outside the noise.
    """

    name: str
    kind: Kind
    techniques: list[str]
    changes: dict[str, Any]
    units_per_s: float
    units_per_s_repeats: list[float]
    speedup: float
    step_ms_median: float
    step_ms_min: float
    step_ms_max: float
    data_wait_fraction: float
    peak_memory_bytes: int
    peak_memory_kind: str
    first_step_ms: float
    parity: Parity
    step_ms: list[float]
    compared_with: str | None = None
    ratio: float | None = None
    note: str = ""
    speedup_low: float | None = None
    speedup_high: float | None = None
    verdict: Verdict = "no-change"
    flags: list[str] = field(default_factory=list)  # implausible results, said plainly
    why: str = ""  # an inconclusive verdict: the spread, the load, the rounds that would settle it
    set_apart: list[str] = field(default_factory=list)  # steps left out of the typical ones


@dataclass(frozen=True)
class Skipped:
    """A technique or peer that was not run, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class WorkloadInfo:
    """What was trained."""

    name: str
    unit: str
    description: str
    facts: dict[str, Any]


@dataclass(frozen=True)
class BenchResult:
    """A whole `torchpace bench` run."""

    environment: Environment
    workload: WorkloadInfo
    settings: dict[str, Any]
    configs: list[ConfigResult]
    skipped: list[Skipped]
    failed: list[Skipped] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    load: LoadSummary | None = None  # how busy the machine was while it measured
    notes: list[str] = field(default_factory=list)  # interactions, budget, interval method

    @property
    def baseline(self) -> ConfigResult:
        """The naive baseline every speedup is relative to."""
        return next(c for c in self.configs if c.kind == "baseline")

    def config(self, name: str) -> ConfigResult:
        """A configuration by name."""
        return next(c for c in self.configs if c.name == name)


def environment(device: torch.device, peers: dict[str, str] | None = None) -> Environment:
    """The environment of this process on `device`."""
    from torchpace import __version__

    cuda = device.type == "cuda"
    cpu = cpu_model() or platform.machine()
    return Environment(
        device=device.type,
        device_name=torch.cuda.get_device_name(device) if cuda else cpu,
        torch=str(torch.__version__),
        cuda=str(torch.version.cuda) if torch.version.cuda else None,
        cudnn=torch.backends.cudnn.version() if cuda else None,
        cores=usable_cores(),
        cpu=cpu,
        python=platform.python_version(),
        platform=platform.platform(),
        torchpace=__version__,
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        peers=dict(peers or {}),
    )


def summarise(
    name: str,
    kind: Kind,
    techniques: list[str],
    changes: dict[str, Any],
    arm: ArmResult,
    parity: Parity,
) -> ConfigResult:
    """Medians and spreads over the repeats of one configuration, and its speedup with interval."""
    runs: list[Measurement] = [r.timed.payload for r in arm.runs]
    throughput = [m.units_per_s for m in runs]
    medians = [median(m.step_ms) for m in runs]
    middle = sorted(runs, key=lambda m: m.units_per_s)[len(runs) // 2]
    ratio = arm.ratio
    return ConfigResult(
        name=name,
        kind=kind,
        techniques=techniques,
        changes=changes,
        units_per_s=median(throughput),
        units_per_s_repeats=throughput,
        speedup=ratio.speedup if ratio else 1.0,
        step_ms_median=median(medians),
        step_ms_min=min(medians),
        step_ms_max=max(medians),
        data_wait_fraction=median(m.data_wait_fraction for m in runs),
        peak_memory_bytes=max(m.peak_memory_bytes for m in runs),
        peak_memory_kind=runs[0].peak_memory_kind,
        first_step_ms=median(m.first_step_ms for m in runs),
        parity=parity,
        step_ms=middle.step_ms,
        speedup_low=ratio.speedup_low if ratio else None,
        speedup_high=ratio.speedup_high if ratio else None,
        verdict=arm.verdict,
        flags=list(arm.flags),
        why=arm.why,
        set_apart=list(arm.set_apart),
    )


def to_jsonl(result: BenchResult) -> str:
    """JSON lines: one self-contained record per configuration, skip and failure, each with the environment."""
    head = {
        "schema_version": result.schema_version,
        "environment": result.environment,
        "workload": result.workload,
        "settings": result.settings,
        "load": result.load,
        "notes": result.notes,
    }
    records: list[dict[str, Any]] = [
        {"type": "config", **head, "config": c} for c in result.configs
    ]
    records += [{"type": "skipped", **head, "skipped": s} for s in result.skipped]
    records += [{"type": "failed", **head, "failed": s} for s in result.failed]
    encoder = msgspec.json.Encoder()
    return "".join(encoder.encode(r).decode() + "\n" for r in records)


class _Record(msgspec.Struct):
    type: str
    schema_version: int
    environment: Environment
    workload: WorkloadInfo
    settings: dict[str, Any]
    load: LoadSummary | None = None
    notes: list[str] = []
    config: ConfigResult | None = None
    skipped: Skipped | None = None
    failed: Skipped | None = None


def read_jsonl(path: str | Path) -> BenchResult:
    """Read back what to_jsonl wrote (one run)."""
    decoder = msgspec.json.Decoder(_Record)
    records = [decoder.decode(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not records:
        raise ValueError(
            f"{path} holds no bench records; write one with torchpace bench -o FILE.json"
        )
    first = records[0]
    return BenchResult(
        environment=first.environment,
        workload=first.workload,
        settings=first.settings,
        configs=[r.config for r in records if r.config is not None],
        skipped=[r.skipped for r in records if r.skipped is not None],
        failed=[r.failed for r in records if r.failed is not None],
        schema_version=first.schema_version,
        load=first.load,
        notes=list(first.notes),
    )
