"""The compare report as GitHub-flavoured Markdown: a verdict to post on a pull request.

Names and notes come from the two traces: each string is shown as written (control characters
made visible, HTML and link brackets escaped), never read as markup.
"""

from __future__ import annotations

from torchpace.compare import Comparison
from torchpace.report.compare import rows
from torchpace.report.markdown import cell, escape, table
from torchpace.report.safe import printable


def render_markdown(c: Comparison) -> str:
    """The whole comparison as Markdown."""
    lines = ["## torchpace compare", "", f"**{_md(c.headline())}**", ""]
    lines += table(["side", "run"], _cells(rows.side_rows(c)))
    lines += [""] + [f"> **Note:** {_md(n)}\n" for n in c.notes]
    lines += ["### Step time by phase (median per step)", ""]
    body = [rows.step_cells(c)] + [rows.change_cells(p) for p in c.phases]
    lines += table(["phase", *rows.CHANGE_HEAD[1:]], _cells(body), right={1, 2, 3})
    for title, items, name in (
        ("Kernels (GPU time per step, largest change first)", c.kernels, "kernel"),
        ("Host operators (self time per step, largest change first)", c.ops, "operator"),
    ):
        lines += ["", f"### {title}", ""]
        if items:
            head = [name, *rows.CHANGE_HEAD[1:]]
            cells = _cells([rows.change_cells(i) for i in items])
            lines += table(head, cells, right={1, 2, 3})
        else:
            lines.append(_md(rows.missing_table(name, c)))
    lines += ["", "### Findings", ""]
    found = rows.findings_rows(c)
    lines += [f"- **{status}** {_md(text)}" for status, text in found] or ["None on either side."]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """A string from the traces as Markdown shows it literally, on one line."""
    return cell(escape(printable(text)))


def _cells(table_rows: list[list[str]]) -> list[list[str]]:
    return [[escape(printable(c)) for c in row] for row in table_rows]
