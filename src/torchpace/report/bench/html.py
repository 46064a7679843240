"""A self-contained HTML page: the table, a speedup bar chart and a step-time plot (inline SVG, no network)."""

from __future__ import annotations

import html
import io
from collections.abc import Sequence

from torchpace.bench.results import BenchResult, ConfigResult
from torchpace.report.bench.text import COLUMNS, SECTIONS, cells, footer_lines, header_lines

COLOURS = {
    "baseline": "#7f7f7f",
    "single": "#4c78a8",
    "cumulative": "#2ca02c",
    "ceiling": "#9467bd",
    "peer": "#ff7f0e",
}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1400px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 4px 8px; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
td:last-child { white-space: normal; }
td:first-child, th:first-child, td:last-child, th:last-child { text-align: left; }
tr.section td { font-weight: bold; background: #f4f4f4; }
.header p { margin: 2px 0; } .skipped li { color: #555; } .failed li { color: #b00; }
figure { margin: 1.5em 0; }
"""


def render_html(result: BenchResult) -> str:
    """The whole page as one string."""
    title = f"torchpace bench: {result.workload.name} on {result.environment.device}"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
        "<div class='header'>"
        + "".join(f"<p>{html.escape(x)}</p>" for x in header_lines(result))
        + "</div>",
        _table(result),
        f"<figure>{speedup_chart(result)}<figcaption>Speedup over the naive baseline with its 95% "
        "interval; ~ no measurable change, ! implausible "
        f"({html.escape(result.environment.line())}).</figcaption></figure>",
        f"<figure>{step_time_chart(result)}<figcaption>Step time per configuration "
        "(all measured steps of the median repeat).</figcaption></figure>",
        _footer(result),
        "</body></html>",
    ]
    return "\n".join(parts)


def _table(result: BenchResult) -> str:
    head = "".join(f"<th>{html.escape(c.format(unit=result.workload.unit))}</th>" for c in COLUMNS)
    rows = []
    for kind, section in SECTIONS.items():
        configs = [c for c in result.configs if c.kind == kind]
        if not configs:
            continue
        rows.append(
            f"<tr class='section'><td colspan='{len(COLUMNS)}'>{html.escape(section)}</td></tr>"
        )
        rows += [
            "<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in cells(c)) + "</tr>"
            for c in configs
        ]
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _footer(result: BenchResult) -> str:
    lines = footer_lines(result)
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(x)}</li>" for x in lines)
    return f"<h2>Flags, notes, skipped and failed</h2><ul class='skipped'>{items}</ul>"


def speedup_chart(result: BenchResult) -> str:
    """Horizontal bars: each configuration's throughput over the baseline's, as inline SVG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    configs = list(result.configs)
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(configs) + 1.2))
    ys = range(len(configs))[::-1]
    # An inconclusive configuration has no ratio to draw: no bar, no interval, a word instead.
    shown = [0.0 if c.verdict == "inconclusive" else c.speedup for c in configs]
    low = [
        s - (c.speedup_low if c.speedup_low is not None and s else s)
        for s, c in zip(shown, configs, strict=True)
    ]
    high = [
        (c.speedup_high if c.speedup_high is not None and s else s) - s
        for s, c in zip(shown, configs, strict=True)
    ]
    ax.barh(
        list(ys),
        shown,
        xerr=[low, high],
        color=[COLOURS[c.kind] for c in configs],
        error_kw={"linewidth": 0.8, "capsize": 2},
    )
    ax.set_yticks(list(ys), [c.name for c in configs], fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    for y, c in zip(ys, configs, strict=True):
        x, words = _label(c)
        ax.text(x, y, words, va="center", fontsize=7)
    ax.set_xlabel(
        f"speedup over the naive baseline (time per {result.workload.unit}), 95% interval"
    )
    ax.set_title(
        f"{result.workload.name}: {result.environment.device}, torch {result.environment.torch}",
        fontsize=9,
    )
    return _svg(fig)


def _label(c: ConfigResult) -> tuple[float, str]:
    """Where a bar's label goes on the x axis, and what it says."""
    if c.verdict == "inconclusive":
        return 1.0, " inconclusive ?"
    mark = " ~" if c.kind != "baseline" and c.verdict == "no-change" else ""
    mark += " !" if c.flags else ""
    return c.speedup_high or c.speedup, f" {c.speedup:.2f}x{mark}"


def step_time_chart(result: BenchResult) -> str:
    """Box plot of measured step times per configuration, as inline SVG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    configs: Sequence[ConfigResult] = [c for c in result.configs if c.step_ms]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(configs) + 1.2))
    data = [c.step_ms for c in configs][::-1]
    try:
        ax.boxplot(data, orientation="horizontal")
    except TypeError:  # matplotlib < 3.10 names it vert
        ax.boxplot(data, vert=False)
    ax.set_yticks(range(1, len(configs) + 1), [c.name for c in configs][::-1], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("step time (ms, log scale)")
    return _svg(fig)


def _svg(fig: object) -> str:
    from matplotlib import pyplot as plt

    buffer = io.StringIO()
    fig.tight_layout()  # type: ignore[attr-defined]
    fig.savefig(buffer, format="svg")  # type: ignore[attr-defined]
    plt.close(fig)  # type: ignore[arg-type]
    svg = buffer.getvalue()
    # Drop the XML prologue and DOCTYPE: the <svg> element inlines into HTML as is.
    return svg[svg.index("<svg") :]
