"""A followed run in HTML: its account (doctor --follow) as a timeline picture and tables.

The picture is the run from the process's start to its end: one column per timeline bin, split
by the phases that held its time (each phase a colour and a hatching, named in the legend), and a
numbered marker over each slow step kept, the same number as in the slow-steps table below it.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from torchpace.report import account, units
from torchpace.report.svg import MUTED, defs, fill, legend, line, rect, svg, text, words

if TYPE_CHECKING:
    from torchpace.runner.sensors.whole_run import RunAccount

WIDTH, LEFT, RIGHT = 1100, 20, 20
STRIP_Y, STRIP_H = 30, 70
TICKS = 6


def run_svg(run: RunAccount) -> str | None:
    """The run's timeline with phases and slow steps marked; None without a timeline."""
    tl = run.timeline
    if tl is None or not tl.bins or run.wall_s <= 0:
        return None
    from torchpace.runner.sensors.whole_run import PHASES

    span = max(run.wall_s, len(tl.bins) * tl.bin_s)
    px = (WIDTH - LEFT - RIGHT) / span
    out = []
    for i, shares in enumerate(tl.bins):
        out.append(_column(LEFT + i * tl.bin_s * px, tl.bin_s * px, shares, PHASES))
    out.append(_ticks(span, px))
    out.append(_markers(run, px))
    used = [p for p in PHASES if run.seconds(p) > 0]
    keys, height = legend("run", used, LEFT, STRIP_Y + STRIP_H + 30, WIDTH - LEFT - RIGHT)
    total_h = STRIP_Y + STRIP_H + 36 + height
    label = f"Timeline of the run: {', '.join(words(p) for p in used)}; slow steps marked"
    return svg(WIDTH, total_h, defs("run", PHASES) + "".join(out) + keys, label)


def _column(x: float, w: float, shares: tuple[float, ...], phases: tuple[str, ...]) -> str:
    """One bin: its phases stacked from the bottom, each as tall as its share of the bin."""
    total = sum(shares)
    if total <= 0:
        return ""
    out, y = [], float(STRIP_Y + STRIP_H)
    for phase, s in zip(phases, shares, strict=True):
        if s <= 0:
            continue
        h = STRIP_H * s / total
        y -= h
        out.append(rect(x, y, w, h, fill("run", phase), f"{words(phase)}: {s * 1000:.0f} ms"))
    return "".join(out)


def _ticks(span: float, px: float) -> str:
    out, base = [], STRIP_Y + STRIP_H
    for k in range(TICKS + 1):
        t = span * k / TICKS
        x = LEFT + t * px
        out.append(line(x, base, x, base + 5, colour=MUTED))
        anchor = "start" if k == 0 else "end" if k == TICKS else "middle"
        out.append(text(x, base + 17, units.run_length(t), anchor=anchor, size=10, colour=MUTED))
    return "".join(out)


def _markers(run: RunAccount, px: float) -> str:
    """A numbered triangle over each slow step, a bar over its span, its number raised when it
    would overlap the one before."""
    out, last_x, raised = [], -1e9, False
    for n, s in enumerate(run.slow_steps, 1):
        x0, x1 = LEFT + (s.at_s - s.ms / 1000.0) * px, LEFT + s.at_s * px
        x = (x0 + x1) / 2
        raised = not raised if x - last_x < 22 else False
        y = STRIP_Y - (18 if raised else 6)
        tip = f"#{n}: step {s.step}, {s.ms:.0f} ms ({s.cause})"
        out.append(line(x0, STRIP_Y - 2, x1, STRIP_Y - 2, colour="#1f2328", width=2.0))
        out.append(
            f"<path d='M{x - 5:.1f},{y - 6:.1f} h10 l-5,7 z' fill='#1f2328'>"
            f"<title>{html.escape(tip)}</title></path>"
        )
        out.append(text(x + 6, y, f"#{n}", size=10, bold=True))
        last_x = x
    return "".join(out)


def section(run: RunAccount | None) -> str:
    """The account's section of the HTML report ("" when the run was not followed)."""
    if run is None:
        return ""
    picture = run_svg(run) or ""
    head = "".join(f"<th>{_e(h)}</th>" for h in account.HEAD)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in account.rows(run)
    )
    parts = [
        f"<section id='account'><h2>{_e(account.title(run))}</h2>{picture}",
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>",
    ]
    if run.slow_steps:
        shead = "".join(f"<th>{_e(h)}</th>" for h in ["#", *account.SLOW_HEAD])
        rows = "".join(
            f"<tr><td>#{n}</td>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>"
            for n, row in enumerate(account.slow_rows(run), 1)
        )
        parts.append(f"<h3>{_e(account.slow_title(run))}</h3>")
        parts.append(f"<table><thead><tr>{shead}</tr></thead><tbody>{rows}</tbody></table>")
    parts += [f"<p>{_e(x)}</p>" for x in account.lines(run)]
    return "".join(parts) + "</section>"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)
