"""The harness: plan baseline, single and cumulative configurations, run them side by side, summarise."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from torchpace.bench import parity, peers, results
from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.loop import Measurement, run_config
from torchpace.bench.results import BenchResult, ConfigResult, Kind, Skipped, WorkloadInfo
from torchpace.bench.technique import Technique
from torchpace.bench.techniques import ORDER, get_technique
from torchpace.bench.workloads.base import Workload

Progress = Callable[[int, int, str], None]
CEILING = "ceiling: data on device"


@dataclass(frozen=True)
class Planned:
    """A configuration to measure: its row name, kind, techniques and run config."""

    name: str
    kind: Kind
    techniques: tuple[Technique, ...]
    config: RunConfig


def plan(
    workload: Workload,
    device: torch.device,
    settings: BenchSettings,
    chosen: Sequence[Technique] = ORDER,
) -> tuple[list[Planned], list[Skipped]]:
    """Baseline, each applicable technique alone (with what it requires), the cumulative recipe, the ceiling."""
    applicable, skipped = _applicable(workload, device, chosen)
    rows = [Planned("baseline", "baseline", (), RunConfig())]
    for technique in applicable:
        deps = tuple(get_technique(n) for n in technique.requires)
        label = technique.name + (f" (+{', '.join(d.name for d in deps)})" if deps else "")
        rows.append(
            Planned(label, "single", (*deps, technique), _config((*deps, technique), settings))
        )
    recipe = _recipe(applicable)
    for k in range(1, len(recipe) + 1):
        stack = tuple(recipe[:k])
        rows.append(Planned(f"+ {stack[-1].name}", "cumulative", stack, _config(stack, settings)))
    if settings.ceiling:
        top = rows[-1] if recipe else rows[0]
        ceiling = dataclasses.replace(top.config, data_on_device=True)
        rows.append(Planned(CEILING, "ceiling", top.techniques, ceiling))
    return rows, skipped


def _applicable(
    workload: Workload, device: torch.device, chosen: Sequence[Technique]
) -> tuple[list[Technique], list[Skipped]]:
    applicable: list[Technique] = []
    skipped: list[Skipped] = []
    for technique in sorted(set(chosen), key=ORDER.index):
        ok, reason = technique.applies_to(workload, device)
        for dep in technique.requires:
            dep_ok, dep_reason = get_technique(dep).applies_to(workload, device)
            if ok and not dep_ok:
                ok, reason = False, f"needs {dep}, which does not apply: {dep_reason}"
        if ok:
            applicable.append(technique)
        else:
            skipped.append(Skipped(technique.name, reason))
    return applicable, skipped


def _recipe(applicable: Sequence[Technique]) -> list[Technique]:
    """What stacks: techniques in recipe order, one per group, trade-offs left out, requirements first."""
    recipe: list[Technique] = []
    groups: set[str] = set()
    for technique in applicable:
        if not technique.in_recipe or (technique.group and technique.group in groups):
            continue
        for dep in technique.requires:
            if dep not in {t.name for t in recipe}:
                recipe.append(get_technique(dep))
        if technique.group:
            groups.add(technique.group)
        recipe.append(technique)
    return recipe


def _config(techniques: Sequence[Technique], settings: BenchSettings) -> RunConfig:
    config = RunConfig()
    for technique in techniques:
        config = technique.apply(config, settings)
    return config


def run_bench(
    workload: Workload,
    device: torch.device,
    settings: BenchSettings,
    chosen: Sequence[Technique] = ORDER,
    progress: Progress | None = None,
) -> BenchResult:
    """Measure every planned configuration `settings.repeat` times, round-robin, and summarise."""
    rows, skipped = plan(workload, device, settings, chosen)
    peer_rows, peer_skipped = peers.plan(workload, device, settings, rows)
    unique = list(dict.fromkeys([r.config for r in rows]))
    runners: dict[object, Callable[[], Measurement]] = {
        c: _runner(workload, c, settings, device) for c in unique
    }
    runners.update({p.name: p.runner for p in peer_rows})
    measured, failed = _measure(runners, settings.repeat, progress)
    env = results.environment(device, peers.versions())
    return _assemble(
        workload, env, settings, rows, peer_rows, measured, skipped + peer_skipped, failed
    )


def _runner(
    workload: Workload, config: RunConfig, settings: BenchSettings, device: torch.device
) -> Callable[[], Measurement]:
    return lambda: run_config(workload, config, settings, device)


def _measure(
    runners: dict[object, Callable[[], Measurement]], repeat: int, progress: Progress | None
) -> tuple[dict[object, list[Measurement]], dict[object, str]]:
    """Round-robin over configurations, `repeat` times: slow drifts of a shared machine hit all alike."""
    measured: dict[object, list[Measurement]] = {key: [] for key in runners}
    failed: dict[object, str] = {}
    total, done = repeat * len(runners), 0
    for r in range(repeat):
        for key, runner in runners.items():
            done += 1
            if key in failed:
                continue
            if progress:
                progress(done, total, f"repeat {r + 1}/{repeat}: {_label(key)}")
            try:
                measured[key].append(runner())
            except Exception as exc:  # one broken configuration must not lose the others
                failed[key] = (
                    f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                )
    return measured, failed


def _label(key: object) -> str:
    if isinstance(key, RunConfig):
        changes = key.changes()
        return ", ".join(f"{k}={v}" for k, v in changes.items()) or "baseline"
    return str(key)


def _assemble(
    workload: Workload,
    env: results.Environment,
    settings: BenchSettings,
    rows: list[Planned],
    peer_rows: list[peers.PeerRow],
    measured: dict[object, list[Measurement]],
    skipped: list[Skipped],
    failed: dict[object, str],
) -> BenchResult:
    base_runs = measured[RunConfig()]
    if not base_runs:
        raise RuntimeError(
            f"the naive baseline failed: {failed.get(RunConfig(), 'no measurement')}"
        )
    base_ups = results.summarise(
        "baseline", "baseline", [], {}, base_runs, None, _same()
    ).units_per_s
    base_losses = base_runs[0].losses
    configs: list[ConfigResult] = []
    failures = [
        Skipped(_label(k) if not isinstance(k, str) else k, why) for k, why in failed.items()
    ]
    for row in rows:
        runs = measured[row.config]
        if not runs:
            continue
        check = (
            _same()
            if row.kind == "baseline"
            else parity.compare(base_losses, runs[0].losses, row.techniques)
        )
        names = [t.name for t in row.techniques]
        configs.append(
            results.summarise(
                row.name, row.kind, names, row.config.changes(), runs, base_ups, check
            )
        )
    configs += peers.summarise_rows(peer_rows, measured, configs, base_ups, base_losses)
    info = WorkloadInfo(workload.name, workload.unit, workload.description, dict(workload.facts))
    return BenchResult(
        environment=env,
        workload=info,
        settings=dataclasses.asdict(settings),
        configs=configs,
        skipped=skipped,
        failed=failures,
    )


def _same() -> results.Parity:
    return results.Parity("baseline", 0.0, 0.0, "reference")
