"""The compare report as GitHub-flavoured Markdown: a verdict to post on a pull request."""

from __future__ import annotations

from torchpace.compare import Comparison
from torchpace.report.compare import rows
from torchpace.report.markdown import cell, table


def render_markdown(c: Comparison) -> str:
    """The whole comparison as Markdown."""
    lines = ["## torchpace compare", "", f"**{cell(c.headline())}**", ""]
    lines += table(["side", "run"], rows.side_rows(c))
    lines += [""] + [f"> **Note:** {cell(n)}\n" for n in c.notes]
    lines += ["### Step time by phase (median per step)", ""]
    body = [rows.step_cells(c)] + [rows.change_cells(p) for p in c.phases]
    lines += table(["phase", *rows.CHANGE_HEAD[1:]], body, right={1, 2, 3})
    for title, items, name in (
        ("Kernels (GPU time per step, largest change first)", c.kernels, "kernel"),
        ("Host operators (self time per step, largest change first)", c.ops, "operator"),
    ):
        lines += ["", f"### {title}", ""]
        if items:
            head = [name, *rows.CHANGE_HEAD[1:]]
            lines += table(head, [rows.change_cells(i) for i in items], right={1, 2, 3})
        else:
            lines.append(cell(rows.missing_table(name, c)))
    lines += ["", "### Findings", ""]
    found = rows.findings_rows(c)
    lines += [f"- **{status}** {cell(text)}" for status, text in found] or ["None on either side."]
    return "\n".join(lines) + "\n"
