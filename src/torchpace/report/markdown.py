"""The Markdown report: GitHub-flavoured tables and fenced fix code, ready to post as a CI comment.

Posted where it renders as HTML, so every string from the trace or a finding is escaped (`escape`:
its HTML and its link brackets) or shown as code (`_code`, `fence`), and its control characters
are made visible first.
"""

from __future__ import annotations

import html

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report import account, facts, findings, memory, units, verified
from torchpace.report import skipped as skips
from torchpace.report.safe import printable_data


def render_markdown(diagnosis: Diagnosis, *, verbose: bool = False) -> str:
    """The whole report as GitHub-flavoured Markdown; `verbose` lists every skipped rule."""
    diagnosis = printable_data(diagnosis)
    parts = [
        header(diagnosis),
        account_section(diagnosis),
        breakdown(diagnosis),
        labels(diagnosis),
        ranks(diagnosis),
        findings_section(diagnosis),
        memory_section(diagnosis),
        verification(diagnosis),
        skipped(diagnosis, verbose=verbose),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def header(diagnosis: Diagnosis) -> str:
    """The title, a summary line and what was measured, as a two-column table."""
    lines = [
        f"## torchpace report: {_code(facts.subject(diagnosis))}",
        "",
        f"**{escape(findings.verdict(diagnosis))}**",
        "",
        "| What was measured | |",
        "|---|---|",
    ]
    for label, value in facts.header_rows(diagnosis):
        shown = cell(_code(value) if label == "Trace" else escape(value))
        lines.append(f"| {escape(label)} | {shown} |")
    # A blank line between notes keeps each one its own quote block.
    notes = [
        line for n in facts.notes(diagnosis) for line in (f"> **Note:** {cell(escape(n))}", "")
    ][:-1]
    return "\n".join([*lines, "", *notes] if notes else lines)


def account_section(diagnosis: Diagnosis) -> str:
    """A followed run's wall time by phase (doctor --follow); "" otherwise."""
    run = diagnosis.account
    if run is None:
        return ""
    rows = [[escape(c) for c in row] for row in account.rows(run)]
    lines = [f"### {escape(account.title(run))}", "", *table(account.HEAD, rows, right={1, 2, 3})]
    if run.slow_steps:
        slow = [[escape(c) for c in row] for row in account.slow_rows(run)]
        lines += ["", f"**{escape(account.slow_title(run))}**", ""]
        lines += table(account.SLOW_HEAD, slow, right={0, 1, 2})
    return "\n".join(lines + [f"\n{escape(line)}" for line in account.lines(run)])


def memory_section(diagnosis: Diagnosis) -> str:
    """The peak step's memory by what holds it, and its largest blocks; "" without the view."""
    view = diagnosis.memory
    if view is None:
        return ""
    lines = [f"### {escape(memory.title(view))}", ""]
    lines += table(memory.HEAD, [[escape(c) for c in r] for r in memory.rows(view)], right={1, 2})
    largest = [[escape(c) for c in r] for r in memory.largest_rows(view)]
    if largest:
        lines += ["", "Largest blocks alive at the peak:", ""]
        lines += table(memory.LARGEST_HEAD, largest, right={0})
    notes = [n for n in (memory.activation_line(view), *view.notes) if n]
    return "\n".join([*lines, *(f"\n> {cell(escape(n))}" for n in notes)])


def breakdown(diagnosis: Diagnosis) -> str:
    """Phase medians, kernel classes and the per-step table (or the outliers)."""
    bd = diagnosis.breakdown
    lines = [f"### {escape(facts.breakdown_title(diagnosis))}", ""]
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


def labels(diagnosis: Diagnosis) -> str:
    """The user's own record_function labels, nested ones indented under their parent."""
    found = diagnosis.labels
    if found is None:
        return ""
    rows = [
        [("&nbsp;&nbsp;" * depth + "↳ " if depth else "") + _code(cells[0]), *cells[1:]]
        for depth, cells in facts.label_rows(found)
    ]
    head = facts.label_header(found)
    lines = [f"### {facts.labels_title(found)}", ""]
    lines += table(head, rows, right=set(range(1, len(head))))
    return "\n".join([*lines, "", facts.labels_footer(found)])


def ranks(diagnosis: Diagnosis) -> str:
    """Multi-rank input: every rank side by side and the slowest rank named."""
    if not diagnosis.ranks:
        return ""
    head = facts.rank_header(diagnosis.ranks)
    rows = facts.rank_rows(diagnosis.ranks, diagnosis.slowest_rank)
    lines = [f"### Ranks ({len(diagnosis.ranks)})", "", "Median ms per step.", ""]
    lines += table(head, rows, right=set(range(1, len(head) - 1)))
    sentence = facts.slowest_sentence(diagnosis)
    return "\n".join([*lines, "", f"**{escape(sentence)}**"] if sentence else lines)


def findings_section(diagnosis: Diagnosis) -> str:
    """Each finding as a subsection with evidence, saving, fenced fix code, locations, caveat."""
    lines = [f"### {escape(findings.title(diagnosis))}"]
    for number, view in enumerate(findings.views(diagnosis), start=1):
        lines += ["", *_finding(view, number)]
    return "\n".join(lines)


def _finding(view: findings.FindingView, number: int) -> list[str]:
    lines = [
        f"#### {number}. {_code(view.title)} - {view.severity.upper()}",
        "",
        escape(view.summary),
        "",
    ]
    if view.evidence:
        lines += table(["evidence", "value"], [[_code(k), escape(v)] for k, v in view.evidence])
        lines.append("")
    lines += [f"**Estimated saving:** {escape(view.saving)}", ""]
    if view.measured:
        lines += [f"**Measured saving:** {escape(view.measured)}", ""]
    if view.fix:
        label = "**Fix:**" if view.prescribed else f"**Fix ({verified.NO_GAIN}, not prescribed):**"
        lines += [label, "", *fence(view.fix), ""]
    if view.locations:
        lines += ["**Where:** " + ", ".join(_code(where) for where in view.locations), ""]
    if view.caveat:
        lines += [f"**Caveat:** {escape(view.caveat)}", ""]
    if view.also:
        lines += [f"{escape(view.also)}.", ""]
    return lines[:-1]


def verification(diagnosis: Diagnosis) -> str:
    """`doctor --verify`: how the fixes were measured, as a two-column table."""
    v = diagnosis.verification
    if v is None:
        return ""
    lines = [f"### {escape(verified.title(v))}", "", "| | |", "|---|---|"]
    lines += [f"| {escape(k)} | {cell(escape(value))} |" for k, value in verified.rows(v)]
    return "\n".join(lines)


def skipped(diagnosis: Diagnosis, *, verbose: bool = False) -> str:
    """Rules that could not run and what would let them run: a line per cause, or per rule."""
    if not diagnosis.skipped:
        return ""
    lines = [f"### {skips.title(diagnosis, verbose=verbose)}", ""]
    if not verbose:
        for group in skips.groups(diagnosis):
            names = group.label() if len(group.rules) > skips.MAX_NAMED else None
            label = names or ", ".join(_code(rule) for rule in group.rules)
            enable = f" To enable: {_code(group.enable)}" if group.enable else ""
            lines.append(f"- {label}: {escape(group.reason)}.{enable}")
        return "\n".join(lines)
    for item in diagnosis.skipped:
        enable = f" To enable: {_code(item.enable)}" if item.enable else ""
        lines.append(f"- {_code(item.rule)}: {escape(item.reason.rstrip('.'))}.{enable}")
    return "\n".join(lines)


def table(head: list[str], rows: list[list[str]], *, right: set[int] | None = None) -> list[str]:
    """A GitHub table; columns in `right` are right-aligned."""
    right = right or set()
    align = ["---:" if i in right else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def cell(text: str) -> str:
    """Text (already escaped or code) safe inside a table cell: pipes escaped, newlines as <br>."""
    return text.replace("|", "\\|").replace("\n", "<br>")


def escape(text: str) -> str:
    """Plain text from a trace or a finding, shown as written: its HTML escaped (`<script>` is
    shown, not run) and its brackets too, so `[x](javascript:...)` is no link (nor `![x](url)`
    an image); backslashes first, or `\\[` would undo the bracket's escape."""
    text = html.escape(text, quote=False)
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def fence(code: str) -> list[str]:
    """A fenced Python block long enough never to be closed by backticks inside the code."""
    ticks = "```"
    while ticks in code:
        ticks += "`"
    return [f"{ticks}python", code, ticks]


def _code(text: str) -> str:
    """An inline code span (shown literally, HTML included) that backticks inside cannot close."""
    ticks = "`"
    while ticks in text:
        ticks += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text.replace(chr(10), ' ')}{pad}{ticks}"
