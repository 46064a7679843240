"""The compare report as plain text: verdict first, then phases, kernels, operators, findings."""

from __future__ import annotations

from collections.abc import Sequence

from torchpace.compare import Comparison
from torchpace.report.compare import rows


def render_text(c: Comparison) -> str:
    """The whole comparison as aligned plain text."""
    out = ["torchpace compare", ""]
    out += [f"{label + ':':8}{text}" for label, text in rows.side_rows(c)]
    out += ["", f"verdict: {c.headline()}"]
    out += [f"note: {n}" for n in c.notes]
    out += ["", "step time by phase (median ms per step)"]
    out += _table([rows.step_cells(c)] + [rows.change_cells(p) for p in c.phases])
    for title, items, name in (
        ("kernels (GPU time per step, largest change first)", c.kernels, "kernel"),
        ("host operators (self time per step, largest change first)", c.ops, "operator"),
    ):
        out += ["", title]
        out += (
            _table([rows.change_cells(i) for i in items])
            if items
            else [f"  {rows.missing_table(name, c)}"]
        )
    out += ["", "findings"]
    found = rows.findings_rows(c)
    out += [f"  {status:9}  {text}" for status, text in found] or ["  none on either side"]
    return "\n".join(out) + "\n"


NAME_WIDTH = 64  # kernel names run to hundreds of characters (templates); the rest is in JSON


def _short(name: str) -> str:
    if len(name) <= NAME_WIDTH:
        return name
    half = (NAME_WIDTH - 3) // 2
    return f"{name[:half]}...{name[-half:]}"


def _table(body: Sequence[Sequence[str]]) -> list[str]:
    table = [rows.CHANGE_HEAD, *([_short(r[0]), *r[1:]] for r in body)]
    widths = [max(len(r[i]) for r in table) for i in range(len(rows.CHANGE_HEAD))]
    lines = []
    for r in table:
        middle = zip(r[1:-1], widths[1:-1], strict=True)
        cells = [r[0].ljust(widths[0])] + [x.rjust(w) for x, w in middle]
        lines.append("  " + "  ".join([*cells, r[-1]]).rstrip())
    return lines
