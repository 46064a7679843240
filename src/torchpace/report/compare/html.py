"""The compare report as one self-contained HTML page (the report's stylesheet, no script)."""

from __future__ import annotations

from collections.abc import Sequence

from torchpace.compare import Comparison
from torchpace.report.compare import rows
from torchpace.report.html_style import CSS
from torchpace.report.svg import esc as _e


def render_html(c: Comparison) -> str:
    """The whole comparison as an HTML document."""
    sides = "".join(f"<p class='sub'>{_e(k)}: {_e(v)}</p>" for k, v in rows.side_rows(c))
    notes = "".join(f"<p class='sub'>Note: {_e(n)}</p>" for n in c.notes)
    sections = [
        _section("Step time by phase (median per step)",
                 _table("phase", [rows.step_cells(c)] + [rows.change_cells(p) for p in c.phases])),
        _section("Kernels (GPU time per step, largest change first)",
                 _table("kernel", [rows.change_cells(k) for k in c.kernels])
                 if c.kernels else f"<p>{_e(rows.missing_table('kernel', c))}</p>"),
        _section("Host operators (self time per step, largest change first)",
                 _table("operator", [rows.change_cells(o) for o in c.ops])
                 if c.ops else f"<p>{_e(rows.missing_table('operator', c))}</p>"),
        _section("Findings", _findings(c)),
    ]  # fmt: skip
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>torchpace compare</title><style>{CSS}</style></head><body>"
        "<header class='top'><div class='wrap'><div class='brand'>torchpace compare</div>"
        f"<h1>{_e(c.headline())}</h1>{sides}{notes}</div></header>"
        f"<main class='wrap'>{''.join(sections)}</main></body></html>\n"
    )


def _section(title: str, body: str) -> str:
    return f"<section><h2>{_e(title)}</h2>{body}</section>"


def _table(first: str, body: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in [first, *rows.CHANGE_HEAD[1:]])
    trs = "".join("<tr>" + "".join(f"<td>{_e(x)}</td>" for x in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>"


def _findings(c: Comparison) -> str:
    items = "".join(
        f"<li><strong>{_e(status)}</strong> {_e(text)}</li>"
        for status, text in rows.findings_rows(c)
    )
    return f"<ul>{items}</ul>" if items else "<p>None on either side.</p>"
