"""The terminal table: rich on a TTY, plain aligned text otherwise; never a speedup without its baseline."""

from __future__ import annotations

import io
from collections.abc import Sequence

from torchpace.bench.results import BenchResult, ConfigResult, Parity
from torchpace.report import units

COLUMNS = (
    "configuration",
    "{unit}/s",
    "speedup [95%]",
    "step ms (median, min-max)",
    "data wait",
    "peak mem",
    "first step",
    "loss parity",
)
SECTIONS = {
    "baseline": "naive baseline",
    "single": "each technique on its own",
    "cumulative": "cumulative (each row adds one technique)",
    "ceiling": "input-pipeline ceiling",
    "peer": "peers: the full recipe's flags under another library; torchpace Nx = recipe / peer",
}


def header_lines(result: BenchResult) -> list[str]:
    """Workload, environment and baseline: the context every number below needs."""
    base = result.baseline
    lines = [
        f"torchpace bench · {result.workload.name}: {result.workload.description}",
        f"environment: {result.environment.line()}",
        *_method_lines(result),
        f"peak memory: {base.peak_memory_kind}",
    ]
    if result.load is not None:
        lines.append(result.load.line())
        if result.load.warning:
            lines.append(f"WARNING: {result.load.warning}")
    lines += pipeline_lines(result)
    return lines


def _method_lines(result: BenchResult) -> list[str]:
    """How it was measured: the core's rounds and intervals, or the older schema's round-robin."""
    s, base, unit = result.settings, result.baseline, result.workload.unit
    rate = f"{_rate(base.units_per_s)} {unit}/s"
    if result.schema_version < 2:  # a file written before the measurement core: no intervals
        return [
            f"measured: {s['steps']} steps x {s['repeat']} repeats after {s['warmup']} warm-up "
            "steps, configurations interleaved round-robin (schema 1: no intervals)",
            f"baseline: naive loop (0 workers, fp32, .item() every step) = {rate}; speedups are "
            "relative to it",
        ]
    most = s.get("max_repeat") or s["repeat"]
    rounds = f"{s['repeat']} rounds" + (
        f" (up to {most} for those still inconclusive)" if most > s["repeat"] else ""
    )
    return [
        f"measured: {s['steps']} steps x {rounds} after {s['warmup']} warm-up steps, "
        "configurations interleaved, each round opened and the last closed by the baseline",
        f"baseline: naive loop (0 workers, fp32, .item() every step) = {rate}; speedup = "
        f"baseline time per {_singular(unit)} over the configuration's, paired with the baseline "
        "runs beside it",
        "speedup [95% interval]; ~ no measurable change (inside the noise); ! implausible (below); "
        "? inconclusive: the interval is too wide to say (below)",
    ]


def _singular(unit: str) -> str:
    return unit[:-1] if unit.endswith("s") else unit


def pipeline_lines(result: BenchResult) -> list[str]:
    """The recipe against the data-on-device ceiling (the input-pipeline efficiency)."""
    ceiling = next((c for c in result.configs if c.kind == "ceiling"), None)
    recipe = next((c for c in reversed(result.configs) if c.kind == "cumulative"), None)
    if ceiling is None:
        return []
    top = recipe or result.baseline
    share = top.units_per_s / ceiling.units_per_s
    unit = result.workload.unit
    return [
        f"input pipeline: the full recipe reaches {share:.2f} of the data-on-device ceiling "
        f"({_rate(top.units_per_s)} vs {_rate(ceiling.units_per_s)} {unit}/s)"
    ]


def cells(config: ConfigResult) -> list[str]:
    """One table row."""
    name = config.name
    if config.ratio is not None:
        name += f" (torchpace {config.ratio:.2f}x)"
    return [
        name,
        _rate(config.units_per_s),
        speedup_text(config),
        f"{config.step_ms_median:.1f} ({config.step_ms_min:.1f}-{config.step_ms_max:.1f})",
        f"{config.data_wait_fraction:.0%}",
        units.memory(config.peak_memory_bytes),
        f"{config.first_step_ms / 1000:.2f} s",
        parity_text(config.parity),
    ]


def speedup_text(config: ConfigResult) -> str:
    """`1.32x [1.20-1.45]`, with `~` inside the noise and `!` when implausible; `inconclusive ?`
    where the interval is too wide to say anything (the footer says why)."""
    if config.kind == "baseline" or config.speedup_low is None or config.speedup_high is None:
        return f"{config.speedup:.2f}x"
    if config.verdict == "inconclusive":  # its interval says nothing: no ratio to print
        return "inconclusive ?"
    mark = " ~" if config.verdict == "no-change" else ""
    mark += " !" if config.flags else ""
    return f"{config.speedup:.2f}x [{config.speedup_low:.2f}-{config.speedup_high:.2f}]{mark}"


def parity_text(parity: Parity) -> str:
    """Loss parity in a few words."""
    if parity.status == "baseline":
        return "reference"
    if parity.status == "not-comparable":
        return f"n/a: {parity.note}"
    diff = f"{parity.max_rel_diff:.1e}" if parity.max_rel_diff is not None else "?"
    if parity.status == "same":
        return f"same math (max rel diff {diff})"
    if parity.status == "within-tolerance":
        return f"within {parity.rtol:g} ({diff}): {parity.note}"
    return f"DIFFERS ({diff} > {parity.rtol:g}): {parity.note}"


def footer_lines(result: BenchResult) -> list[str]:
    """Implausible results, notes, skipped techniques and peers with their reasons, failures."""
    lines = [f"! {c.name}: {flag}" for c in result.configs for flag in c.flags]
    lines += [f"? {c.name}: {c.why}" for c in result.configs if c.why]
    lines += [f"note: {n}" for n in result.notes]
    lines += [f"skipped {s.name}: {s.reason}" for s in result.skipped]
    lines += [f"FAILED {f.name}: {f.reason}" for f in result.failed]
    return lines


def render_plain(result: BenchResult) -> str:
    """Aligned plain text for pipes, files and CI logs."""
    header = [c.format(unit=result.workload.unit) for c in COLUMNS]
    groups = _grouped(result.configs)
    rows = [cells(c) for _, configs in groups for c in configs]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [*header_lines(result), "", _join(header, widths)]
    for kind, configs in groups:
        lines += [f"-- {SECTIONS[kind]}", *(_join(cells(c), widths) for c in configs)]
    footer = footer_lines(result)
    return "\n".join([*lines, "", *footer] if footer else lines) + "\n"


def render_rich(result: BenchResult, width: int | None = None) -> str:
    """The same table drawn by rich, for a terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(show_lines=False, header_style="bold")
    for i, column in enumerate(COLUMNS):
        table.add_column(
            column.format(unit=result.workload.unit), justify="left" if i in (0, 7) else "right"
        )
    for kind, configs in _grouped(result.configs):
        table.add_row(f"[dim]{SECTIONS[kind]}[/dim]", *[""] * (len(COLUMNS) - 1))
        for config in configs:
            row = cells(config)
            style = "bold green" if config.kind == "cumulative" and config is configs[-1] else None
            table.add_row(*row, style=style)
    console = Console(file=io.StringIO(), force_terminal=True, width=width or 160)
    for line in header_lines(result):
        console.print(line, highlight=False, markup=False)
    console.print(table)
    for line in footer_lines(result):
        console.print(
            line, highlight=False, markup=False, style="red" if line.startswith("FAILED") else "dim"
        )
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def _grouped(configs: Sequence[ConfigResult]) -> list[tuple[str, list[ConfigResult]]]:
    return [
        (k, [c for c in configs if c.kind == k])
        for k in SECTIONS
        if any(c.kind == k for c in configs)
    ]


def _join(row: Sequence[str], widths: Sequence[int]) -> str:
    parts = [row[0].ljust(widths[0])] + [
        c.rjust(w) for c, w in zip(row[1:-1], widths[1:-1], strict=True)
    ]
    return "  ".join([*parts, row[-1]]).rstrip()


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"
