"""The colour terminal report, drawn with rich: tables, one panel per finding, highlighted fix code.

Imported only when colour is asked for: rich costs ~40 ms to import, the plain path never pays it.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report import account, facts, findings, memory, units, verified
from torchpace.report import skipped as skips
from torchpace.report.safe import printable_data

if TYPE_CHECKING:
    from torchpace.doctor.memory_view import MemoryView
    from torchpace.runner.sensors.whole_run import RunAccount

SEVERITY_STYLES = {"high": "bold red", "medium": "bold yellow", "low": "bold cyan"}


def render_rich(diagnosis: Diagnosis, *, width: int | None = None, verbose: bool = False) -> str:
    """The whole report with ANSI colour, laid out for a terminal `width` columns wide.

    Trace strings are made printable first (report/safe.py) and never read as rich markup: a
    kernel name like `void f<[bold]>` is shown as it is.
    """
    diagnosis = printable_data(diagnosis)
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=True,
        color_system="256",
        width=width or 100,
        highlight=False,
        markup=False,
    )
    for renderable in _sections(diagnosis, verbose=verbose):
        console.print(renderable)
        console.print()
    return buffer.getvalue()


def _sections(diagnosis: Diagnosis, *, verbose: bool) -> Iterator[RenderableType]:
    # The same sections as the plain text (report/text.py), in its order: the verdict first.
    yield Group(
        Text(f"torchpace report: {facts.subject(diagnosis)}", style="bold"),
        Text.assemble(("Verdict: ", "bold"), findings.verdict(diagnosis)),
    )
    if diagnosis.account is not None:
        yield account_table(diagnosis.account)
    yield from breakdown(diagnosis)
    if diagnosis.labels is not None:
        yield labels(diagnosis)
    if diagnosis.ranks:
        yield ranks(diagnosis)
    yield Text(findings.title(diagnosis), style="bold")
    for number, view in enumerate(findings.views(diagnosis), start=1):
        yield finding_panel(view, number)
    if diagnosis.memory is not None:
        yield memory_table(diagnosis.memory)
    if diagnosis.verification is not None:
        yield verification(diagnosis)
    if diagnosis.skipped:
        yield skipped(diagnosis, verbose=verbose)
    yield header(diagnosis)


def header(diagnosis: Diagnosis) -> RenderableType:
    """What was measured, in a panel; notes below it."""
    body: list[RenderableType] = [_pairs(facts.header_rows(diagnosis))]
    body += [Text(f"Note: {note}", style="yellow") for note in facts.notes(diagnosis)]
    return Panel(Group(*body), title=Text("What was measured"), title_align="left")


def verification(diagnosis: Diagnosis) -> RenderableType:
    """`doctor --verify`: how the fixes were measured, all safe fixes together, what was left."""
    v = diagnosis.verification
    assert v is not None
    return _titled(verified.title(v), _pairs(verified.rows(v)))


def breakdown(diagnosis: Diagnosis) -> Iterator[RenderableType]:
    """Phase medians with share bars, kernel classes, and the per-step table (or outliers)."""
    bd = diagnosis.breakdown
    table = _table(["phase"], ["time", "share"])
    table.add_column("", style="green")
    for label, value, frac in facts.phase_rows(bd):
        table.add_row(label, units.ms(value), units.share(frac), "█" * round(frac * 30))
    yield _titled(facts.breakdown_title(diagnosis), table)
    kernels = facts.kernel_rows(bd)
    if kernels:
        ktable = _table(["class"], ["time", "of step"])
        for name, value, frac in kernels:
            ktable.add_row(name, units.ms(value), units.share(frac))
        yield _titled("GPU kernel time by class (median per step)", ktable)
    shown = facts.shown_steps(bd)
    if shown and diagnosis.info.step_source != "window":
        phases, gpu, sm = facts.step_phases(bd), facts.has_gpu(bd), facts.has_sm(bd)
        head = facts.step_header(phases, gpu=gpu, sm=sm)
        stable = _table(head[:1], head[1:-1])
        stable.add_column(head[-1], style="yellow")
        for step in shown:
            stable.add_row(*facts.step_row(step, phases, gpu=gpu, sm=sm))
        yield _titled(facts.steps_title(bd, shown), stable)


def labels(diagnosis: Diagnosis) -> RenderableType:
    """The user's own record_function labels as an indented tree, median per step."""
    found = diagnosis.labels
    assert found is not None
    head = facts.label_header(found)
    table = _table(head[:1], head[1:])
    for depth, cells in facts.label_rows(found):
        table.add_row(Text("  " * depth + cells[0]), *cells[1:])
    footer = Text(facts.labels_footer(found), style="dim")
    return Group(Text(facts.labels_title(found), style="bold"), table, footer)


def ranks(diagnosis: Diagnosis) -> RenderableType:
    """Every rank's medians side by side; the slowest rank highlighted and named."""
    head = facts.rank_header(diagnosis.ranks)
    table = _table(head[:1], head[1:-1])
    table.add_column("")
    for row in facts.rank_rows(diagnosis.ranks, diagnosis.slowest_rank):
        table.add_row(*row, style="bold red" if row[-1] else None)
    parts: list[RenderableType] = [
        Text(f"Ranks ({len(diagnosis.ranks)}), median ms per step", style="bold"),
        table,
    ]
    sentence = facts.slowest_sentence(diagnosis)
    return Group(*parts, Text(sentence, style="bold")) if sentence else Group(*parts)


def finding_panel(view: findings.FindingView, number: int) -> RenderableType:
    """One finding in a panel coloured by severity."""
    style = SEVERITY_STYLES.get(view.severity, "bold")
    body: list[RenderableType] = [Text(view.summary, style="bold")]
    if view.evidence:
        body += [Text("Evidence", style="underline"), _pairs(view.evidence, style="dim")]
    body.append(Text.assemble(("Estimated saving: ", "bold green"), view.saving))
    if view.measured:
        body.append(Text.assemble(("Measured saving: ", "bold green"), view.measured))
    if view.fix:
        label = "Fix" if view.prescribed else f"Fix ({verified.NO_GAIN}, not prescribed)"
        # Wrapped, never cut at the panel's edge: the fix is code the user copies.
        code = Syntax(view.fix, "python", theme="ansi_dark", word_wrap=True)
        body += [Text(label, style="underline"), code]
    if view.locations:
        body.append(Text.assemble(("Where: ", "bold"), ", ".join(view.locations)))
    if view.caveat:
        body.append(Text.assemble(("Caveat: ", "bold yellow"), view.caveat))
    if view.also:
        body.append(Text(view.also, style="italic"))
    title = Text.assemble((f"{number}. {view.severity.upper()} ", style), (view.title, "bold"))
    return Panel(Group(*body), title=title, title_align="left", border_style=style.split()[-1])


def skipped(diagnosis: Diagnosis, *, verbose: bool = False) -> RenderableType:
    """Rules that could not run and what would let them run: a row per cause, or per rule."""
    if not verbose:
        lines = [Text(f"  {skips.line(group)}") for group in skips.groups(diagnosis)]
        return Group(Text(skips.title(diagnosis), style="bold"), *lines)
    table = _table(["rule", "why", "to enable"])
    for item in diagnosis.skipped:
        table.add_row(item.rule, item.reason, item.enable)
    return _titled(skips.title(diagnosis, verbose=True), table)


def account_table(run: RunAccount) -> RenderableType:
    """A followed run's wall time by phase (doctor --follow)."""
    table = _table(account.HEAD[:1], account.HEAD[1:])
    for row in account.rows(run):
        table.add_row(*row)
    parts: list[RenderableType] = [_titled(account.title(run), table)]
    if run.slow_steps:
        slow = _table(account.SLOW_HEAD[:1], account.SLOW_HEAD[1:3])
        for c in account.SLOW_HEAD[3:]:
            slow.add_column(c)
        for row in account.slow_rows(run):
            slow.add_row(*row)
        parts.append(_titled(account.slow_title(run), slow))
    parts += [Text(f"  {line}") for line in account.lines(run)]
    return Group(*parts)


def memory_table(view: MemoryView) -> RenderableType:
    """The peak step's memory by what holds it, and its largest blocks."""
    split = _table(memory.HEAD[:1], memory.HEAD[1:])
    for row in memory.rows(view):
        split.add_row(*row)
    parts: list[RenderableType] = [Text(memory.title(view), style="bold"), split]
    largest = memory.largest_rows(view)
    if largest:
        blocks = Table(header_style="bold", title="Largest blocks alive at the peak")
        for i, name in enumerate(memory.LARGEST_HEAD):
            blocks.add_column(name, justify="right" if i == 0 else "left")
        for row in largest:
            blocks.add_row(*row)
        parts.append(blocks)
    parts += [Text(n) for n in (memory.activation_line(view), *view.notes) if n]
    return Group(*parts)


def _table(left: list[str], right: list[str] | None = None) -> Table:
    table = Table(header_style="bold")
    for name in left:
        table.add_column(name)
    for name in right or []:
        table.add_column(name, justify="right")
    return table


def _pairs(rows: Iterable[tuple[str, str]], *, style: str = "bold") -> Table:
    """Label/value rows without borders, the labels in `style`."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style=style)
    grid.add_column()
    for label, value in rows:
        grid.add_row(label, value)
    return grid


def _titled(title: str, table: Table) -> RenderableType:
    # A caption line above the table: rich would wrap a long table title to the table's width.
    return Group(Text(title, style="bold"), table)
