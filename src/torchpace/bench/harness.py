"""The harness: plan baseline, single and cumulative configurations, run them side by side, summarise."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence

import torch

from torchpace import measure
from torchpace.bench import parity, peers, results
from torchpace.bench.config import BenchSettings, RunConfig
from torchpace.bench.loop import Measurement, run_config
from torchpace.bench.results import BenchResult, ConfigResult, Skipped, WorkloadInfo
from torchpace.bench.technique import Planned, Technique
from torchpace.bench.techniques import ORDER, get_technique
from torchpace.bench.techniques.workers import default_workers
from torchpace.bench.workloads.base import Workload

Progress = Callable[[int, int, str], None]
CEILING = "ceiling: data on device"


def plan(
    workload: Workload,
    device: torch.device,
    settings: BenchSettings,
    chosen: Sequence[Technique] = ORDER,
) -> tuple[list[Planned], list[Skipped]]:
    """Baseline, each applicable technique alone (with what it requires), the cumulative recipe, the ceiling."""
    settings = with_workers(settings, device)
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


def with_workers(settings: BenchSettings, device: torch.device) -> BenchSettings:
    """The settings with the worker count filled in from the worker policy when none was given."""
    if settings.workers is not None:
        return settings
    return dataclasses.replace(settings, workers=default_workers(device))


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
    """Measure every planned configuration with the measurement core and summarise.

    Configurations run interleaved, `settings.repeat` rounds, each round opened by the baseline and
    the last closed by it (torchpace.measure): speedups are ratios to the baseline runs beside them.
    """
    settings = with_workers(settings, device)
    rows, skipped = plan(workload, device, settings, chosen)
    peer_rows, peer_skipped = peers.plan(workload, device, settings, rows)
    arms = _arms(workload, device, settings, rows, peer_rows)
    core = measure.Settings(
        settings.warmup,
        settings.steps,
        settings.repeat,
        settings.budget_s,
        max_repeats=settings.max_repeat,
        seed=settings.seed,
    )
    try:
        measured = measure.measure(arms, core, progress=progress)
    except measure.BaselineFailed as exc:
        raise RuntimeError(f"the naive baseline failed: {exc.__cause__ or exc}") from exc
    env = results.environment(device, peers.versions())
    result = _assemble(workload, env, settings, rows, peer_rows, measured, skipped + peer_skipped)
    return dataclasses.replace(result, load=measured.load, notes=_notes(result, measured))


def _arms(
    workload: Workload,
    device: torch.device,
    settings: BenchSettings,
    rows: list[Planned],
    peer_rows: list[peers.PeerRow],
) -> list[measure.Arm]:
    """One arm per distinct configuration (rows may share one), then the peers; baseline first."""
    expects: dict[RunConfig, measure.Expect] = {}
    for row in rows:
        expects.setdefault(row.config, _expect(row.techniques, device))
    arms = [
        measure.Arm(
            _label(c), _runner(functools.partial(run_config, workload, c, settings, device)), e
        )
        for c, e in expects.items()
    ]
    arms += [measure.Arm(p.name, _runner(p.runner)) for p in peer_rows]
    return arms


def _runner(run: Callable[[], Measurement]) -> Callable[[measure.Window], measure.Timed]:
    """The bench's own loop as a core arm: the window is the bench's settings already."""

    def timed(window: measure.Window) -> measure.Timed:
        m = run()
        units = tuple(float(u) for u in m.step_units) if m.step_units else None
        return measure.Timed(tuple(m.step_ms), units, m)

    return timed


def _expect(techniques: Sequence[Technique], device: torch.device) -> measure.Expect:
    """A stack can only cost time if all of it can; its ceiling is the product of its members'."""
    if not techniques:
        return measure.Expect()
    parts = [t.expect(device) for t in techniques]
    cost_only = all(p.cost_only for p in parts)
    caps = [p.max_speedup for p in parts]
    cap = math.prod(c for c in caps if c is not None) if all(c is not None for c in caps) else None
    why = "; ".join(p.why for p in parts if p.why)
    return measure.Expect(cost_only, cap, why)


def _label(config: RunConfig) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.changes().items()) or "baseline"


def _assemble(
    workload: Workload,
    env: results.Environment,
    settings: BenchSettings,
    rows: list[Planned],
    peer_rows: list[peers.PeerRow],
    measured: measure.Measured,
    skipped: list[Skipped],
) -> BenchResult:
    names = {a.name for a in measured.arms}
    base_losses = measured.baseline.runs[0].timed.payload.losses
    configs: list[ConfigResult] = []
    for row in rows:
        label = _label(row.config)
        if label not in names:
            continue
        check = (
            results.Parity("baseline", 0.0, 0.0, "reference")
            if row.kind == "baseline"
            else parity.compare(base_losses, measured.arm(label).runs[0].timed.payload.losses,
                                row.techniques)
        )  # fmt: skip
        configs.append(
            results.summarise(
                row.name,
                row.kind,
                [t.name for t in row.techniques],
                row.config.changes(),
                measured.arm(label),
                check,
            )
        )
    configs += peers.summarise_rows(peer_rows, measured, configs, base_losses)
    info = WorkloadInfo(workload.name, workload.unit, workload.description, dict(workload.facts))
    failures = [Skipped(name, why) for name, why in measured.failed]
    failures += [Skipped(name, "not measured: time budget") for name in measured.not_measured]
    return BenchResult(
        environment=env,
        workload=info,
        settings=dataclasses.asdict(settings),
        configs=configs,
        skipped=skipped,
        failed=failures,
    )


def _notes(result: BenchResult, measured: measure.Measured) -> list[str]:
    """What the numbers need said beside them: stacks that lose to their parts, the method."""
    notes = [*measured.notes, *_interactions(result)]
    method = next((c for c in measured.arms if c.ratio is not None), None)
    if method is not None and method.ratio is not None:
        notes.append(f"intervals: 95%, {method.ratio.method}")
    return notes


def _interactions(result: BenchResult) -> list[str]:
    """A note for each stack slower than one of its techniques alone, beyond the noise."""
    notes = []
    singles = {c.techniques[-1]: c for c in result.configs if c.kind == "single" and c.techniques}
    for stack in (c for c in result.configs if c.kind == "cumulative"):
        for name in stack.techniques:
            alone = singles.get(name)
            if alone is None or alone.speedup_low is None or stack.speedup_high is None:
                continue
            if alone.speedup_low > stack.speedup_high:
                notes.append(
                    f"the stack '{stack.name}' ({stack.speedup:.2f}x) is slower than {name} alone "
                    f"({alone.speedup:.2f}x), beyond the noise: the techniques interact here "
                    f"(e.g. workers and compute threads share {result.environment.cores} cores)"
                )
    return notes
