"""Small inline-SVG pieces for the HTML report's pictures: no script, no external reference.

Every category (a phase, a kernel class, an idle cause) has a colour and a hatching, so a picture
printed in grey or read by a colour-blind reader still tells its bars apart; the legend and the
labels carry the same words and numbers. Each picture defines its own patterns under a prefix of
its own, so one picture stands alone (a CI comment) and several share a page without clashes.
Every string drawn passes through `esc` (names from a trace included).
"""

from __future__ import annotations

import html
from collections.abc import Iterable

INK, MUTED, GRID = "#1f2328", "#5b6470", "#e3e6ea"
FONT = "font-family='system-ui,DejaVu Sans,sans-serif'"

# label -> (colour, hatching); the colours follow report/plots.py's phase palette.
STYLES: dict[str, tuple[str, str]] = {
    "dataloader": ("#e8743b", "diag"),
    "data": ("#e8743b", "diag"),
    "h2d": ("#a05195", "vert"),
    "sync": ("#d45087", "cross"),
    "forward": ("#3d7ebf", "none"),
    "backward": ("#19a979", "back"),
    "optimizer": ("#ede15b", "dots"),
    "other": ("#b7b7b7", "horiz"),
    "gemm": ("#6aa3d9", "grid"),
    "conv": ("#127a5a", "back2"),
    "attention": ("#945ecf", "dots2"),
    "elementwise": ("#f2b447", "diag2"),
    "reduction": ("#13a4b4", "vert2"),
    "communication": ("#d45087", "horiz2"),
    "copy": ("#a05195", "zig"),
    "launch_overhead": ("#f2b8a2", "dots"),
    "context_init": ("#6c4f3d", "vert"),
    "allocator": ("#ede15b", "back"),
    "host_compute": ("#3d7ebf", "none"),
    "work": ("#3d7ebf", "none"),
    "wait": ("#f2b8a2", "diag"),
    "bar": ("#3d7ebf", "none"),
    # a followed run's phases (report/run_figure.py)
    "start-up": ("#6c4f3d", "vert"),
    "compile": ("#f28e2b", "zig"),
    "training": ("#3d7ebf", "none"),
    "evaluation": ("#19a979", "back"),
    "checkpoint": ("#a05195", "cross"),
    "epoch-start": ("#e8743b", "diag"),
    "gc": ("#ede15b", "dots"),
    "torchpace": ("#b7b7b7", "horiz"),
    "unexplained": ("#d45087", "grid"),
    "tear-down": ("#945ecf", "vert2"),
}
_HATCH = {
    "none": "",
    "diag": "M0,6 l6,-6",
    "back": "M0,0 l6,6",
    "vert": "M3,0 v6",
    "horiz": "M0,3 h6",
    "cross": "M0,6 l6,-6 M0,0 l6,6",
    "dots": "M2,2 h1 M5,5 h1",
    "grid": "M0,3 h6 M3,0 v6",
    "diag2": "M0,3 l3,-3 M0,6 l6,-6 M3,6 l3,-3",
    "back2": "M0,3 l3,3 M0,0 l6,6 M3,0 l3,3",
    "vert2": "M1.5,0 v6 M4.5,0 v6",
    "horiz2": "M0,1.5 h6 M0,4.5 h6",
    "dots2": "M1,1 h1 M4,1 h1 M1,4 h1 M4,4 h1",
    "zig": "M0,4 l1.5,-2 l1.5,2 l1.5,-2 l1.5,2",
}


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def words(label: str) -> str:
    """A label as the page says it: host_compute -> host compute."""
    return label.replace("_", " ")


def defs(prefix: str, labels: Iterable[str]) -> str:
    """One pattern per label: its colour, with its hatching drawn over it in dark ink."""
    out = []
    for label in dict.fromkeys(labels):
        colour, hatch = STYLES.get(label, STYLES["other"])
        lines = (
            f"<path d='{_HATCH[hatch]}' stroke='#000' stroke-opacity='.5' stroke-width='1.1'/>"
            if _HATCH[hatch]
            else ""
        )
        out.append(
            f"<pattern id='{prefix}-{esc(label)}' patternUnits='userSpaceOnUse' width='6' "
            f"height='6'><rect width='6' height='6' fill='{colour}'/>{lines}</pattern>"
        )
    return f"<defs>{''.join(out)}</defs>"


def fill(prefix: str, label: str) -> str:
    return f"url(#{prefix}-{esc(label)})"


def rect(x: float, y: float, w: float, h: float, paint: str, tip: str = "") -> str:
    """A box; `tip` becomes its hover title."""
    title = f"<title>{esc(tip)}</title>" if tip else ""
    return (
        f"<rect x='{x:.1f}' y='{y:.1f}' width='{max(w, 0.5):.1f}' height='{h:.1f}' "
        f"fill='{paint}'>{title}</rect>"
    )


def text(x: float, y: float, value: object, *, anchor: str = "start", size: int = 11,
         bold: bool = False, colour: str = INK) -> str:  # fmt: skip
    weight = " font-weight='600'" if bold else ""
    return (
        f"<text x='{x:.1f}' y='{y:.1f}' text-anchor='{anchor}' font-size='{size}' fill='{colour}'"
        f"{weight}>{esc(value)}</text>"
    )


def line(x1: float, y1: float, x2: float, y2: float, *, colour: str = GRID,
         dash: str = "", width: float = 1.0) -> str:  # fmt: skip
    dashed = f" stroke-dasharray='{dash}'" if dash else ""
    return (
        f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' stroke='{colour}' "
        f"stroke-width='{width}'{dashed}/>"
    )


def legend(
    prefix: str, labels: Iterable[str], x: float, y: float, width: float
) -> tuple[str, float]:
    """Swatches with their words, wrapped to `width`; the markup and the height it took."""
    out, cx, cy = [], x, y
    for label in labels:
        step = 26 + 7 * len(words(label))
        if cx + step > x + width and cx > x:
            cx, cy = x, cy + 18
        out.append(rect(cx, cy, 14, 12, fill(prefix, label)) + text(cx + 18, cy + 10, words(label)))
        cx += step
    return "".join(out), cy - y + 18


def svg(width: float, height: float, body: str, label: str) -> str:
    """The picture, sized to scale with the page; `label` is what a screen reader says."""
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width:.0f} {height:.0f}' "
        f"role='img' aria-label='{esc(label)}' {FONT}>{body}</svg>"
    )
