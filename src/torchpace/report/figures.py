"""The HTML report's pictures as hand-made inline SVG: plain data in, markup out.

Each picture labels its bars with their numbers, so it reads without its colours (report/svg.py
adds hatching too); each returns None when the data it needs is absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from torchpace.doctor.diagnosis import RankView
from torchpace.doctor.pictures import MemoryCurve, StepLanes
from torchpace.report import units
from torchpace.report.svg import MUTED, defs, fill, legend, line, rect, svg, text, words
from torchpace.trace.summary import rank_of
from torchpace.trace.top import TopRow

WIDTH = 1100  # the SVG's own units; the page scales it to the column
LABEL_W = 190  # the left column of lane and bar labels
LANE_H, LANE_GAP = 16, 4
MAX_NAME = 48  # characters of an operator or kernel name drawn (the full name on hover)


def _bar_rows(
    prefix: str, rows: Sequence[tuple[str, Sequence[tuple[str, float]], str]], title: str
) -> str:
    """Horizontal bars, one per row: (label, [(style, value)...] stacked, text after the bar)."""
    scale_max = max((sum(v for _, v in parts) for _, parts, _ in rows), default=0.0)
    plot_w, row_h = WIDTH - LABEL_W - 260, 22
    out = []
    for i, (label, parts, after) in enumerate(rows):
        y, x = 8 + i * row_h, float(LABEL_W)
        out.append(text(LABEL_W - 8, y + 13, label, anchor="end"))
        for style, value in parts:
            w = plot_w * value / scale_max if scale_max > 0 else 0.0
            out.append(rect(x, y, w, row_h - 6, fill(prefix, style), f"{words(style)}: {after}"))
            x += w
        out.append(text(x + 6, y + 13, after, colour=MUTED))
    styles = [s for _, parts, _ in rows for s, _ in parts]
    height = 14 + len(rows) * row_h
    return svg(WIDTH, height, defs(prefix, styles) + "".join(out), title)


def idle_svg(by_cause: Mapping[str, float] | None, step_ms: float) -> str | None:
    """The median step's GPU idle time by what the host was doing, largest first."""
    if not by_cause:
        return None
    idle = sum(by_cause.values())
    causes = sorted(((c, ms) for c, ms in by_cause.items() if ms > 0), key=lambda kv: -kv[1])
    if idle <= 0 or not causes:
        return None
    rows = [
        (words(c), [(c, ms)], f"{units.ms(ms)}, {units.share(ms / idle)} of the idle time")
        for c, ms in causes
    ]
    return _bar_rows("idle", rows, f"GPU idle {units.ms(idle)} of a {units.ms(step_ms)} step")


def ranks_svg(ranks: Sequence[RankView], slowest: int | None) -> str | None:
    """Each rank's median step as work beside waiting in collectives (the slowest named)."""
    if len(ranks) < 2 or any(r.work is None for r in ranks):
        return None
    rows = []
    for position, view in enumerate(ranks):
        rank, w = rank_of(view.info, position), view.work
        assert w is not None
        wait = w.wait_ms  # the figure the rank-imbalance evidence shows
        mark = " (slowest)" if rank == slowest else ""
        rows.append(
            (
                f"rank {rank}{mark}",
                [("work", w.work_ms), ("wait", wait)],
                f"work {units.ms(w.work_ms)} + waiting {units.ms(wait)}",
            )
        )
    return _bar_rows("ranks", rows, "Work and collective wait per rank")


def top_svg(rows: Sequence[TopRow], what: str, prefix: str) -> str | None:
    """The top kernels or operators as bars, each with its total and share."""
    if not rows:
        return None
    bars = []
    for r in rows:
        name = r.name if len(r.name) <= MAX_NAME else r.name[: MAX_NAME - 1] + "…"
        bars.append(
            (name, [("bar", r.total_ms)], f"{units.ms(r.total_ms)}, {units.share(r.share)}")
        )
    return _wide_labels(bars, f"Top {what}", prefix)


def _wide_labels(
    bars: Sequence[tuple[str, Sequence[tuple[str, float]], str]], title: str, prefix: str
) -> str:
    """Bars whose names are long: the names get their own line above each bar."""
    scale_max = max(sum(v for _, v in parts) for _, parts, _ in bars)
    plot_w, row_h = WIDTH - 260, 34
    out = []
    for i, (label, parts, after) in enumerate(bars):
        y = 4 + i * row_h
        out.append(text(0, y + 11, label, size=11))
        w = plot_w * parts[0][1] / scale_max if scale_max > 0 else 0.0
        out.append(rect(0, y + 15, w, 12, fill(prefix, "bar"), f"{label}: {after}"))
        out.append(text(w + 6, y + 26, after, colour=MUTED))
    return svg(WIDTH, 8 + len(bars) * row_h, defs(prefix, ["bar"]) + "".join(out), title)


def _ticks(x0: float, y: float, span_ms: float, px_per_ms: float, height: float) -> str:
    """Five gridlines across `height` with their times below."""
    out = []
    for i in range(5):
        t = span_ms * i / 4
        x = x0 + t * px_per_ms
        out.append(
            line(x, y - height, x, y)
            + text(x, y + 12, units.ms(t), anchor="middle", size=10, colour=MUTED)
        )
    return "".join(out)


def _lanes(step: StepLanes, y: float, px: float) -> tuple[str, float]:
    """One step's heading, mark strip and lanes from `y`; the markup and the height it took."""
    out = [text(0, y + 12, f"step {step.index}: {units.ms(step.duration_ms)}", bold=True)]
    y += 18
    out.append(text(LABEL_W - 8, y + 9, "host waits", anchor="end", size=10, colour=MUTED))
    for m in step.marks:
        w = (m.end_ms - m.start_ms) * px
        out.append(rect(LABEL_W + m.start_ms * px, y, w, 10, fill("tl", m.label),
                        f"{m.label}: {units.ms(m.end_ms - m.start_ms)}"))  # fmt: skip
        if w > 40:
            out.append(text(LABEL_W + m.start_ms * px + 3, y + 9, m.label, size=9))
    y += 14
    for lane in step.lanes:
        out.append(text(LABEL_W - 8, y + 12, lane.name, anchor="end", size=10))
        out.append(rect(LABEL_W, y, step.duration_ms * px, LANE_H, "#f6f7f9"))
        for s in lane.spans:
            x, w = LABEL_W + s.start_ms * px, (s.end_ms - s.start_ms) * px
            tip = f"{words(s.label)}: {units.ms(s.end_ms - s.start_ms)}"
            out.append(rect(x, y, w, LANE_H, fill("tl", s.label), tip))
            if w > 8 * len(s.label) + 6:
                out.append(text(x + 3, y + 12, words(s.label), size=10, bold=True))
        y += LANE_H + LANE_GAP
    return "".join(out), y + 6


def timeline_svg(steps: Sequence[StepLanes]) -> str | None:
    """Typical steps drawn as lanes on one time scale: the host's phases, the device's streams
    (blank: idle), and where the host waited on the device or the DataLoader."""
    if not steps:
        return None
    longest = max(s.duration_ms for s in steps)
    if longest <= 0:
        return None
    px = (WIDTH - LABEL_W - 10) / longest
    labels = [
        x.label for s in steps for x in (*s.marks, *(sp for ln in s.lanes for sp in ln.spans))
    ]
    used = list(dict.fromkeys(labels))
    keyed, y = legend("tl", used, LABEL_W, 4, WIDTH - LABEL_W)
    out = [keyed, text(0, 14, "blank = idle / other", size=10, colour=MUTED)]
    y += 10
    top = y
    for step in steps:
        markup, y = _lanes(step, y, px)
        out.append(markup)
    out.append(_ticks(LABEL_W, y, longest, px, y - top))
    body = defs("tl", used) + "".join(out)
    return svg(WIDTH, y + 18, body, f"Timeline of {len(steps)} typical steps")


def memory_svg(curve: MemoryCurve | None) -> str | None:
    """Allocated (solid) and reserved (dashed) memory over the window, steps marked, peaks
    written out."""
    if curve is None or len(curve.ms) < 2:
        return None
    top_mb = max([*curve.allocated_mb, *(curve.reserved_mb or ())]) or 1.0
    span = (curve.ms[-1] - curve.ms[0]) or 1.0
    x0, plot_w, plot_h, y0 = 70.0, WIDTH - 90.0, 180.0, 30.0

    def xy(t: float, mb: float) -> str:
        return (
            f"{x0 + (t - curve.ms[0]) / span * plot_w:.1f},{y0 + plot_h - mb / top_mb * plot_h:.1f}"
        )

    out = [line(x0, y0 + plot_h * (1 - f), x0 + plot_w, y0 + plot_h * (1 - f)) +
           text(x0 - 6, y0 + plot_h * (1 - f) + 4, units.memory(top_mb * f * 2**20), anchor="end", size=10,
                colour=MUTED) for f in (0, 0.5, 1)]  # fmt: skip
    for index, t in curve.step_starts_ms:
        if curve.ms[0] <= t <= curve.ms[-1]:
            x = x0 + (t - curve.ms[0]) / span * plot_w
            out.append(line(x, y0, x, y0 + plot_h, dash="2,3") + text(x + 2, y0 + plot_h + 12,
                       f"step {index}", size=9, colour=MUTED))  # fmt: skip
    lines = [("allocated", curve.allocated_mb, "")]
    if curve.reserved_mb is not None:
        lines.append(("reserved", curve.reserved_mb, "6,4"))
    for n, (name, values, dash) in enumerate(lines):
        points = " ".join(xy(t, mb) for t, mb in zip(curve.ms, values, strict=True))
        dashed = f" stroke-dasharray='{dash}'" if dash else ""
        out.append(f"<polyline points='{points}' fill='none' stroke='#1f2328' stroke-width='1.6'"
                   f"{dashed}/>")  # fmt: skip
        out.append(line(x0 + 260 * n, 10, x0 + 260 * n + 30, 10, colour="#1f2328", dash=dash,
                        width=1.6) + text(x0 + 260 * n + 36, 14, f"{name}, peak {units.memory(max(values) * 2**20)}"))  # fmt: skip
    title = f"{curve.device} memory over the profiled steps"
    return svg(WIDTH, y0 + plot_h + 20, "".join(out), title)
