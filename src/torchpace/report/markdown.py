"""The Markdown report: GitHub-flavoured tables and fenced fix code, ready to post as a CI comment."""

from __future__ import annotations

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report import facts, findings, units


def render_markdown(diagnosis: Diagnosis) -> str:
    """The whole report as GitHub-flavoured Markdown."""
    parts = [
        header(diagnosis),
        breakdown(diagnosis),
        ranks(diagnosis),
        findings_section(diagnosis),
        skipped(diagnosis),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def header(diagnosis: Diagnosis) -> str:
    """The title, a summary line and what was measured, as a two-column table."""
    lines = [
        "## torchpace report",
        "",
        f"**{findings.verdict(diagnosis)}**",
        "",
        "| What was measured | |",
        "|---|---|",
    ]
    for label, value in facts.header_rows(diagnosis):
        shown = cell(_code(value) if label == "Trace" else value)
        lines.append(f"| {label} | {shown} |")
    # A blank line between notes keeps each one its own quote block.
    notes = [line for n in facts.notes(diagnosis) for line in (f"> **Note:** {cell(n)}", "")][:-1]
    return "\n".join([*lines, "", *notes] if notes else lines)


def breakdown(diagnosis: Diagnosis) -> str:
    """Phase medians, kernel classes and the per-step table (or the outliers)."""
    bd = diagnosis.breakdown
    lines = [f"### {facts.breakdown_title(diagnosis)}", ""]
    lines += table(
        ["phase", "time", "share"],
        [[label, units.ms(v), units.share(f)] for label, v, f in facts.phase_rows(bd)],
        right={1, 2},
    )
    kernels = facts.kernel_rows(bd)
    if kernels:
        lines += ["", "GPU kernel time by class (median per step):", ""]
        rows = [[name, units.ms(v), units.share(f)] for name, v, f in kernels]
        lines += table(["class", "time", "of step"], rows, right={1, 2})
    shown = facts.shown_steps(bd)
    if shown and diagnosis.info.step_source != "window":
        phases, gpu, sm = facts.step_phases(bd), facts.has_gpu(bd), facts.has_sm(bd)
        title = facts.steps_title(bd, shown)
        rows = [facts.step_row(s, phases, gpu=gpu, sm=sm) for s in shown]
        lines += ["", f"{title}:", ""]
        head = facts.step_header(phases, gpu=gpu, sm=sm)
        lines += table(head, rows, right=set(range(1, len(head) - 1)))
    return "\n".join(lines)


def ranks(diagnosis: Diagnosis) -> str:
    """Multi-rank input: every rank side by side and the slowest rank named."""
    if not diagnosis.ranks:
        return ""
    head = facts.rank_header(diagnosis.ranks)
    rows = facts.rank_rows(diagnosis.ranks, diagnosis.slowest_rank)
    lines = [f"### Ranks ({len(diagnosis.ranks)})", "", "Median ms per step.", ""]
    lines += table(head, rows, right=set(range(1, len(head) - 1)))
    sentence = facts.slowest_sentence(diagnosis)
    return "\n".join([*lines, "", f"**{sentence}**"] if sentence else lines)


def findings_section(diagnosis: Diagnosis) -> str:
    """Each finding as a subsection with evidence, saving, fenced fix code, locations, caveat."""
    lines = [f"### {findings.title(diagnosis)}"]
    for number, view in enumerate(findings.views(diagnosis), start=1):
        lines += ["", *_finding(view, number)]
    return "\n".join(lines)


def _finding(view: findings.FindingView, number: int) -> list[str]:
    lines = [
        f"#### {number}. `{view.title}` - {view.severity.upper()}",
        "",
        view.summary,
        "",
    ]
    if view.evidence:
        lines += table(["evidence", "value"], [[_code(k), v] for k, v in view.evidence])
        lines.append("")
    lines += [f"**Estimated saving:** {view.saving}", ""]
    if view.fix:
        lines += ["**Fix:**", "", *fence(view.fix), ""]
    if view.locations:
        lines += ["**Where:** " + ", ".join(_code(where) for where in view.locations), ""]
    if view.caveat:
        lines += [f"**Caveat:** {view.caveat}", ""]
    if view.also:
        lines += [f"{view.also}.", ""]
    return lines[:-1]


def skipped(diagnosis: Diagnosis) -> str:
    """Rules that could not run, and what would let them run."""
    if not diagnosis.skipped:
        return ""
    lines = ["### Not analysed", ""]
    for item in diagnosis.skipped:
        enable = f" To enable: {_code(item.enable)}" if item.enable else ""
        lines.append(f"- `{item.rule}`: {item.reason.rstrip('.')}.{enable}")
    return "\n".join(lines)


def table(head: list[str], rows: list[list[str]], *, right: set[int] | None = None) -> list[str]:
    """A GitHub table; columns in `right` are right-aligned."""
    right = right or set()
    align = ["---:" if i in right else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def cell(text: str) -> str:
    """Text safe inside a table cell: pipes escaped, newlines as <br>."""
    return text.replace("|", "\\|").replace("\n", "<br>")


def fence(code: str) -> list[str]:
    """A fenced Python block long enough never to be closed by backticks inside the code."""
    ticks = "```"
    while ticks in code:
        ticks += "`"
    return [f"{ticks}python", code, ticks]


def _code(text: str) -> str:
    ticks = "``" if "`" in text else "`"
    return f"{ticks}{text}{ticks}"
