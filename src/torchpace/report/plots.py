"""Figures for the HTML report, drawn with matplotlib (Agg) and returned as inline SVG text.

Only fixed labels (phase names, step numbers, rank numbers, kernel classes) are drawn: names that come
from a trace go into HTML tables, where they are escaped. matplotlib is imported inside the functions
so that importing the report package stays cheap.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from torchpace.report.facts import PHASE_LABELS
from torchpace.trace.summary import Breakdown, Phase

# One colour per phase, the same on every figure and in the HTML legend (colour-blind-safe palette).
PHASE_COLORS: dict[Phase, str] = {
    Phase.DATALOADER: "#e8743b",
    Phase.H2D: "#a05195",
    Phase.SYNC: "#d45087",
    Phase.FORWARD: "#3d7ebf",
    Phase.BACKWARD: "#19a979",
    Phase.OPTIMIZER: "#ede15b",
    Phase.OTHER: "#b7b7b7",
}
BUSY_COLOR, IDLE_COLOR, TEXT_COLOR, GRID_COLOR = "#19a979", "#f2b8a2", "#333333", "#e6e6e6"
# Distinct ids per figure: several SVGs share one HTML document, and clip-path ids must not collide.
_figure_ids = itertools.count()


@contextmanager
def _figure(width_in: float, height_in: float) -> Iterator[tuple[Any, Any]]:
    """A fresh Agg figure with the house look; closed on exit."""
    # The Agg canvas, attached directly: no pyplot, so a user's own backend and figures are untouched.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=96, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    ax.tick_params(colors=TEXT_COLOR, labelsize=9)
    ax.grid(axis="y", color=GRID_COLOR, linewidth=0.8)
    ax.set_axisbelow(True)
    yield fig, ax


def _svg(fig: Any) -> str:
    """The figure as an <svg> element (no XML prolog), text kept as text, deterministic ids."""
    import matplotlib

    salt = f"torchpace-{next(_figure_ids)}"
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _stack(ax: Any, xs: Sequence[float], layers: dict[Phase, list[float]], width: float) -> None:
    """Stacked bars, one layer per phase, bottom to top in Phase order."""
    bottom = [0.0] * len(xs)
    for phase, values in layers.items():
        if not any(values):
            continue
        ax.bar(
            xs, values, width, bottom=bottom, color=PHASE_COLORS[phase], label=PHASE_LABELS[phase]
        )
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]


def step_phases_svg(breakdown: Breakdown) -> str:
    """A stacked bar per step: where each step's host time went, with the median step marked."""
    steps = breakdown.steps
    xs = list(range(len(steps)))
    layers = {p: [s.phase_ms.get(p, 0.0) for s in steps] for p in Phase}
    with _figure(11.2, 3.4) as (fig, ax):
        _stack(ax, xs, layers, 0.72)
        ax.axhline(breakdown.median_step_ms, color=TEXT_COLOR, linewidth=1, linestyle="--")
        ax.annotate(
            f"median {breakdown.median_step_ms:.1f} ms",
            (1.0, breakdown.median_step_ms),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=8,
            color=TEXT_COLOR,
        )
        _step_ticks(ax, [s.index for s in steps], [bool(s.outlier) for s in steps])
        ax.set_ylabel("ms", color=TEXT_COLOR, fontsize=9)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
        return _svg(fig)


def _step_ticks(ax: Any, indices: Sequence[int], outliers: Sequence[bool]) -> None:
    """Label bars with step numbers (thinned when many); outlier steps get a star."""
    every = max(1, len(indices) // 24)
    ticks = list(range(0, len(indices), every))
    labels = [f"{indices[i]}{'*' if outliers[i] else ''}" for i in ticks]
    ax.set_xticks(ticks, labels)
    ax.set_xlabel("step (* = outlier, left out of medians)", color=TEXT_COLOR, fontsize=8)


def gpu_busy_svg(breakdown: Breakdown) -> str | None:
    """GPU busy vs idle time per step; None for a CPU-only trace."""
    steps = [s for s in breakdown.steps if s.gpu_busy_ms is not None]
    if not steps:
        return None
    busy = [min(s.gpu_busy_ms or 0.0, s.duration_ms) for s in steps]
    idle = [s.duration_ms - b for s, b in zip(steps, busy, strict=True)]
    xs = list(range(len(steps)))
    with _figure(11.2, 2.4) as (fig, ax):
        ax.bar(xs, busy, 0.72, color=BUSY_COLOR, label="GPU busy")
        ax.bar(xs, idle, 0.72, bottom=busy, color=IDLE_COLOR, label="GPU idle")
        _step_ticks(ax, [s.index for s in steps], [bool(s.outlier) for s in steps])
        ax.set_ylabel("ms", color=TEXT_COLOR, fontsize=9)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
        return _svg(fig)


def kernel_classes_svg(breakdown: Breakdown) -> str | None:
    """Median GPU time per step by kernel class, as horizontal bars; None without kernels."""
    items = sorted(
        ((name, ms) for name, ms in (breakdown.kernel_ms_by_class or {}).items() if ms > 0),
        key=lambda kv: kv[1],
    )
    if not items:
        return None
    with _figure(7.0, 0.6 + 0.34 * len(items)) as (fig, ax):
        ax.grid(axis="y", visible=False)
        ax.grid(axis="x", color=GRID_COLOR, linewidth=0.8)
        ax.barh([name for name, _ in items], [ms for _, ms in items], color="#3d7ebf", height=0.6)
        ax.set_xlabel("ms per step (median)", color=TEXT_COLOR, fontsize=8)
        return _svg(fig)
