"""The memory view's section (doctor/memory_view.py), shared by every renderer: its title, the
categories of the peak, the largest blocks alive at the peak, and its JSON document. The HTML
report adds a stacked bar of the categories (memory_bar_svg) beside the memory curve."""

from __future__ import annotations

from html import escape
from typing import Any

from torchpace.doctor.memory_view import MemoryView
from torchpace.report import svg
from torchpace.trace.stats import fmt_bytes

HEAD = ["held by", "bytes", "share"]
LARGEST_HEAD = ["bytes", "what", "made in", "op", "where"]


def title(view: MemoryView) -> str:
    """The section's title: the peak in one line."""
    what = (
        f"peaks at {fmt_bytes(view.total_bytes)}"
        if view.peak_bytes is not None
        else f"rises {fmt_bytes(view.rise_bytes)} over its start"
    )
    return (
        f"{view.device} memory: step {view.step_index} {what}, {view.peak_ms:.1f} ms into the step"
    )


def rows(view: MemoryView) -> list[list[str]]:
    """One row per category: label, bytes, share of what they add up to."""
    total = sum(n for _, n in view.categories) or 1
    return [[name, fmt_bytes(n), f"{n / total:.0%}"] for name, n in view.categories]


def largest_rows(view: MemoryView, count: int = 5) -> list[list[str]]:
    """The largest blocks alive at the peak: bytes, category, phase, op, user's line."""
    return [
        [
            fmt_bytes(b.bytes),
            b.category + (f" ({b.module})" if b.module else ""),
            b.phase,
            b.op or "-",
            str(b.where) if b.where is not None else "-",
        ]
        for b in view.largest[:count]
    ]


def activation_line(view: MemoryView) -> str:
    """The modules whose forward made the most activations alive at the peak; "" without."""
    if not view.activation_modules:
        return ""
    parts = ", ".join(f"{m} {fmt_bytes(n)}" for m, n in view.activation_modules)
    return f"activations by module (checkpointing candidates): {parts}"


def document(view: MemoryView) -> dict[str, Any]:
    """The view as JSON-ready data (bytes in `*_bytes` keys)."""
    return {
        "device": view.device,
        "step_index": view.step_index,
        "peak_ms": round(view.peak_ms, 3),
        "peak_allocated_bytes": view.peak_bytes,
        "reserve_bytes": view.reserve_bytes,
        "rise_bytes": view.rise_bytes,
        "from_live_run": view.live,
        "categories_bytes": dict(view.categories),
        "largest": [
            {
                "bytes": b.bytes,
                "category": b.category,
                "phase": b.phase,
                "op": b.op,
                "module": b.module,
                "where": str(b.where) if b.where is not None else None,
            }
            for b in view.largest
        ],
        "activation_modules_bytes": dict(view.activation_modules),
        "notes": list(view.notes),
    }


# Each category also has its label beside its swatch: the bar reads without colour.
_FILLS = {
    "parameters": "#4c72b0",
    "gradients": "#dd8452",
    "optimizer state": "#55a868",
    "buffers": "#8172b3",
    "activations": "#c44e52",
    "allocator reserve": "#cccccc",
}


def memory_bar_svg(view: MemoryView, width: float = 640) -> str | None:
    """The peak as one stacked bar, a segment per category, each named below it."""
    total = sum(n for _, n in view.categories)
    if total <= 0:
        return None
    x, bar, body = 0.0, 26.0, []
    for i, (name, n) in enumerate(view.categories):
        w = width * n / total
        paint = _FILLS.get(name, "#937860")
        label = f"{name}: {fmt_bytes(n)} ({n / total:.0%})"
        body.append(svg.rect(x, 0, w, bar, paint, label))
        y = bar + 16 + 16 * i
        body.append(svg.rect(0, y - 10, 12, 12, paint) + svg.text(18, y, label))
        x += w
    height = bar + 16 * len(view.categories) + 10
    return svg.svg(width, height, "".join(body), title(view))


def html_section(view: MemoryView) -> str:
    """The bar, what it is made of, and the largest blocks at the peak (HTML)."""
    picture = memory_bar_svg(view)
    if picture is None:
        return ""
    head = "".join(f"<th>{escape(h)}</th>" for h in LARGEST_HEAD)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>"
        for row in largest_rows(view, 8)
    )
    extra = [activation_line(view), *view.notes]
    notes = "".join(f"<p class='note'>{escape(n)}</p>" for n in extra if n)
    return (
        f"<h3>{escape(title(view))}: what holds it</h3><figure>{picture}</figure>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}"
    )
