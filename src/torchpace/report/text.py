"""The plain-text report: no colour, no escape codes, only ASCII of its own (pipes and CI logs)."""

from __future__ import annotations

import textwrap

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report import account, facts, findings, memory, units, verified
from torchpace.report import skipped as skips
from torchpace.report.safe import printable_data

DEFAULT_WIDTH = 100
_BAR = 30  # characters of the share bar at 100%


def render_text(diagnosis: Diagnosis, *, width: int | None = None, verbose: bool = False) -> str:
    """The whole report as plain text, wrapped to `width` columns (default 100); `verbose` lists
    every skipped rule (else they are grouped by cause).

    Strings from the trace are shown with their control characters escaped (report/safe.py).
    """
    diagnosis = printable_data(diagnosis)
    w = max(40, width or DEFAULT_WIDTH)
    parts = [
        header(diagnosis, w),
        account_section(diagnosis),
        breakdown(diagnosis),
        labels(diagnosis, w),
        ranks(diagnosis, w),
        findings_section(diagnosis, w),
        memory_section(diagnosis, w),
        verification(diagnosis, w),
        skipped(diagnosis, w, verbose=verbose),
        measured(diagnosis, w),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def header(diagnosis: Diagnosis, width: int) -> str:
    """What the report is about, and the verdict first."""
    verdict = _wrap(findings.verdict(diagnosis), width, first="Verdict: ", rest="  ")
    return "\n".join([f"torchpace report: {facts.subject(diagnosis)}", *verdict])


def account_section(diagnosis: Diagnosis) -> str:
    """A followed run's wall time by phase (doctor --follow); "" otherwise."""
    run = diagnosis.account
    if run is None:
        return ""
    out = [
        account.title(run),
        *_indent(table_lines(account.HEAD, account.rows(run), right={1, 2, 3})),
    ]
    if run.slow_steps:
        slow = table_lines(account.SLOW_HEAD, account.slow_rows(run), right={0, 1, 2})
        out += ["", account.slow_title(run), *_indent(slow)]
    return "\n".join([*out, *(f"  {line}" for line in account.lines(run))])


def memory_section(diagnosis: Diagnosis, width: int) -> str:
    """The peak step's memory by what holds it, and its largest blocks; "" without the view."""
    view = diagnosis.memory
    if view is None:
        return ""
    lines = [
        memory.title(view),
        *_indent(table_lines(memory.HEAD, memory.rows(view), right={1, 2})),
    ]
    largest = memory.largest_rows(view)
    if largest:
        lines += ["  Largest blocks alive at the peak"]
        lines += _indent(_indent(table_lines(memory.LARGEST_HEAD, largest, right={0})))
    for note in (memory.activation_line(view), *view.notes):
        if note:
            lines += _wrap(note, width, first="  ", rest="    ")
    return "\n".join(lines)


def measured(diagnosis: Diagnosis, width: int) -> str:
    """What was measured: files, device, steps and how they were found, median step, notes."""
    lines = ["What was measured", *_pairs(facts.header_rows(diagnosis), width)]
    for note in facts.notes(diagnosis):
        lines += _wrap(note, width, first="  Note: ", rest="        ")
    return "\n".join(lines)


def breakdown(diagnosis: Diagnosis) -> str:
    """Median time and share per phase, kernel classes, and the per-step table (or outliers)."""
    bd = diagnosis.breakdown
    rows = facts.phase_rows(bd)
    lines = [facts.breakdown_title(diagnosis)]
    if rows:
        table = [
            [label, units.ms(value), units.share(frac), _bar(frac)] for label, value, frac in rows
        ]
        lines += _indent(table_lines(["phase", "time", "share", ""], table, right={1, 2}))
    else:
        lines.append("  (no step time recorded)")
    kernels = facts.kernel_rows(bd)
    if kernels:
        lines += ["", "GPU kernel time by class (median per step)"]
        table = [[name, units.ms(value), units.share(frac)] for name, value, frac in kernels]
        lines += _indent(table_lines(["class", "time", "of step"], table, right={1, 2}))
    lines += _steps(diagnosis)
    return "\n".join(lines)


def _steps(diagnosis: Diagnosis) -> list[str]:
    bd = diagnosis.breakdown
    shown = facts.shown_steps(bd)
    if not shown or diagnosis.info.step_source == "window":
        return []
    phases, gpu, sm = facts.step_phases(bd), facts.has_gpu(bd), facts.has_sm(bd)
    title = facts.steps_title(bd, shown)
    head = facts.step_header(phases, gpu=gpu, sm=sm)
    table = [facts.step_row(s, phases, gpu=gpu, sm=sm) for s in shown]
    return ["", title, *_indent(table_lines(head, table, right=set(range(1, len(head) - 1))))]


def labels(diagnosis: Diagnosis, width: int) -> str:
    """The user's own record_function labels as an indented tree, median per step."""
    found = diagnosis.labels
    if found is None:
        return ""
    table = [[f"{'  ' * depth}{cells[0]}", *cells[1:]] for depth, cells in facts.label_rows(found)]
    head = facts.label_header(found)
    lines = [facts.labels_title(found)]
    lines += _indent(table_lines(head, table, right=set(range(1, len(head)))))
    return "\n".join(lines + _wrap(facts.labels_footer(found), width, first="  ", rest="  "))


def ranks(diagnosis: Diagnosis, width: int) -> str:
    """Multi-rank input: every rank's medians side by side and the slowest rank named."""
    if not diagnosis.ranks:
        return ""
    rows = facts.rank_rows(diagnosis.ranks, diagnosis.slowest_rank)
    header_ = facts.rank_header(diagnosis.ranks)
    lines = [f"Ranks ({len(diagnosis.ranks)}), median ms per step"]
    lines += _indent(table_lines(header_, rows, right=set(range(1, len(header_) - 1))))
    sentence = facts.slowest_sentence(diagnosis)
    if sentence:  # wrapped like every other sentence (it ran to 220 columns)
        lines += ["", *_wrap(sentence, width, first="", rest="")]
    return "\n".join(lines)


def findings_section(diagnosis: Diagnosis, width: int) -> str:
    """Each finding: severity, rule, summary, evidence, saving against its baseline, fix, where."""
    lines = [findings.title(diagnosis)]
    for number, view in enumerate(findings.views(diagnosis), start=1):
        lines += ["", *_finding(view, number, width)]
    return "\n".join(lines)


def _finding(view: findings.FindingView, number: int, width: int) -> list[str]:
    first = f"{number}. [{view.severity.upper()}] {view.title}: "
    lines = _wrap(view.summary, width, first=first, rest="   ")
    if view.evidence:
        lines += ["   Evidence:", *_pairs(view.evidence, width, indent=5)]
    lines += _wrap(view.saving, width, first="   Estimated saving: ", rest="     ")
    if view.measured:
        lines += _wrap(view.measured, width, first="   Measured saving: ", rest="     ")
    if view.fix:
        label = "Fix:" if view.prescribed else f"Fix ({verified.NO_GAIN}, not prescribed):"
        lines += [f"   {label}", *(f"     {line}".rstrip() for line in view.fix.splitlines())]
    if view.locations:
        lines.append("   Where:")
        lines += [f"     {where}" for where in view.locations]
    if view.caveat:
        lines += _wrap(view.caveat, width, first="   Caveat: ", rest="     ")
    if view.also:
        lines += _wrap(view.also, width, first="   ", rest="     ")
    return lines


def verification(diagnosis: Diagnosis, width: int) -> str:
    """`doctor --verify`: how the fixes were measured, all safe fixes together, what was left."""
    v = diagnosis.verification
    if v is None:
        return ""
    return "\n".join([verified.title(v), *_pairs(verified.rows(v), width)])


def skipped(diagnosis: Diagnosis, width: int, *, verbose: bool = False) -> str:
    """Rules that could not run on this input and what would let them run: a line per cause, or
    per rule when `verbose`."""
    if not diagnosis.skipped:
        return ""
    lines = [skips.title(diagnosis, verbose=verbose)]
    if not verbose:
        for group in skips.groups(diagnosis):
            lines += _wrap(skips.line(group), width, first="  ", rest="    ")
        return "\n".join(lines)
    for item in diagnosis.skipped:
        lines += _wrap(item.reason, width, first=f"  {item.rule}: ", rest="    ")
        if item.enable:
            lines += _wrap(item.enable, width, first="    To enable: ", rest="      ")
    return "\n".join(lines)


def table_lines(header_: list[str], rows: list[list[str]], *, right: set[int]) -> list[str]:
    """A space-aligned table; columns in `right` are right-aligned (numbers)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header_, *rows, strict=False)]

    def line(cells: list[str]) -> str:
        out = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=False))
        ]
        return "  ".join(out).rstrip()

    return [line(header_), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _pairs(rows: list[tuple[str, str]], width: int, indent: int = 2) -> list[str]:
    """Label/value rows, the values aligned and wrapped under themselves."""
    pad = max(len(label) for label, _ in rows) + 2
    lines = []
    for label, value in rows:
        first = " " * indent + label.ljust(pad)
        lines += _wrap(value, width, first=first, rest=" " * (pad + indent))
    return lines


def _bar(fraction: float) -> str:
    return "#" * round(max(0.0, min(1.0, fraction)) * _BAR)


def _indent(lines: list[str]) -> list[str]:
    return [f"  {line}" if line else line for line in lines]


def _wrap(text: str, width: int, *, first: str, rest: str) -> list[str]:
    # Long summaries wrap under their label; never split words or file paths.
    wrapped = textwrap.wrap(
        text,
        width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return wrapped or [first.rstrip()]
