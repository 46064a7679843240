"""The HTML report: one self-contained page (inline CSS and SVG, no script, no network).

Every string that comes from a trace or a finding passes through `_e` (svg.esc: html.escape) before it reaches
the page; figures carry only fixed labels (see report/plots.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from torchpace import __version__
from torchpace.doctor.diagnosis import Diagnosis, RankView
from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.report import facts, plots, run_figure, units, verified
from torchpace.report import html_figures as figures
from torchpace.report import skipped as skips
from torchpace.report.findings import verdict
from torchpace.report.html_style import CSS
from torchpace.report.svg import esc as _e
from torchpace.trace.summary import Breakdown, Phase, rank_of
from torchpace.trace.top import TopTables

MAX_LIST_ITEMS = 12  # evidence lists longer than this are cut, saying how many were left out


def render_html(diagnosis: Diagnosis, *, top: TopTables | None = None) -> str:
    """The whole report as one HTML document, with the top kernels/operators tables from `top`,
    else from `diagnosis.top` (filled by diagnose(..., top=True)); none when neither has them.
    """
    if top is None:
        top = diagnosis.top
    proof = figures.proof_name(diagnosis)  # the verdict's picture comes first, then the findings
    timeline = figures.picture(diagnosis, "timeline", proof)
    memory = figures.picture(diagnosis, "memory", proof)
    sections = [
        run_figure.section(diagnosis.account),
        figures.proof_section(diagnosis, proof),
        _findings_section(diagnosis),
        _verification_section(diagnosis),
        f"<section id='timeline'><h2>Typical steps</h2>{timeline}</section>" if timeline else "",
        _ranks_section(diagnosis, proof),
        _gpu_section(diagnosis, proof),
        _steps_section(diagnosis.breakdown, facts.breakdown_title(diagnosis)),
        f"<section id='memory'><h2>Memory</h2>{memory}</section>" if memory else "",
        figures.top_section(top, proof),
        _labels_section(diagnosis),
        _skipped_section(diagnosis),
        _run_section(diagnosis),
        _open_section(facts.trace_files(diagnosis)),
    ]
    title = f"torchpace report: {facts.subject(diagnosis)}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
        f"{_header(diagnosis)}<main class='wrap'>{''.join(s for s in sections if s)}</main>"
        f"<footer>Made by torchpace {_e(__version__)}: 'torchpace explain RULE' prints a rule's "
        "page; 'torchpace rules' lists them.</footer></body></html>\n"
    )


def _header(d: Diagnosis) -> str:
    """The dark banner: what was analysed and the headline numbers."""
    html_cards = "".join(
        f"<div class='card'><div class='k'>{k}</div><div class='v{' long' if k == 'Device' else ''}'>{v}</div>"
        f"<div class='s'>{s}</div></div>"
        for k, v, s in _cards(d)
    )
    return (
        "<header class='top'><div class='wrap'><div class='brand'>torchpace</div>"
        f"<h1>Training performance report</h1><p class='sub'>{_e(facts.subject(d))}</p>"
        f"<p class='verdict'>{_e(verdict(d))}</p>"
        f"<div class='cards'>{html_cards}</div></div></header>"
    )


# complex: one flat list of the six cards, each value with its own "n/a".
def _cards(d: Diagnosis) -> list[tuple[str, str, str]]:
    """The banner's cards: (what, value, beneath it)."""
    info, bd = d.info, d.breakdown
    counts = {s: sum(1 for f in d.findings if f.severity is s) for s in Severity}
    savings = [f.saving_ms for f in d.findings if f.saving_ms]
    warm = sum(1 for s in bd.steps if s.warmup)
    steps = f"{len(bd.steps)} steps" + (f", {warm} warm-up" if warm else "")
    return [
        ("Median step", units.ms(bd.median_step_ms), steps),
        ("Device", _e(info.device_name or ("CPU" if info.device_kind == "cpu" else "GPU")), ""),
        (
            "GPU busy",
            units.share(bd.gpu_busy_fraction) if bd.gpu_busy_fraction is not None else "n/a",
            "of the median step" if bd.gpu_busy_fraction is not None else "CPU-only trace",
        ),
        (
            "SM efficiency",
            units.share(bd.sm_efficiency) if bd.sm_efficiency is not None else "n/a",
            "est., how much of the GPU its kernels used"
            if bd.sm_efficiency is not None
            else "not recorded in this trace",
        ),
        (
            "Findings",
            " ".join(f"<span class='{s.label}'>{counts[s]}</span>" for s in reversed(Severity)),
            "high / medium / low",
        ),
        ("Largest saving", units.ms(max(savings)) if savings else "n/a", "per step, estimated"),
    ]


def _run_section(d: Diagnosis) -> str:
    """What was measured: the same rows the text and Markdown reports show."""
    rows = [*facts.header_rows(d), *(("Note", note) for note in facts.notes(d))]
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f"<section id='run'><h2>What was measured</h2><table class='kv'>{body}</table></section>"


def _findings_section(d: Diagnosis) -> str:
    if not d.findings:
        body = "<p class='empty'>No rule found anything to fix in this trace.</p>"
    else:
        body = "".join(_finding(f, d, first=i == 0) for i, f in enumerate(d.findings))
    return f"<section id='findings'><h2>{_e(facts.findings_title(d))}</h2>{body}</section>"


def _finding(f: Finding, d: Diagnosis, *, first: bool = False) -> str:
    """One finding as a card: severity, rule, saving, summary, evidence, fix, method, caveat."""
    if f.saving_ms is not None:
        fraction = f.saving_fraction
        share = f" ({units.share(fraction)} of the step)" if fraction is not None else ""
        saving = f"<span class='saving'>saves ~{units.ms(f.saving_ms)} per step{share}</span>"
    else:
        saving = "<span class='saving none'>no saving estimate</span>"
    rank = f"<span class='tag'>rank {f.rank}</span>" if f.rank is not None else ""
    if f.measured is not None and f.measured.saving_ms is not None:
        saving += f"<span class='saving'>measured {units.ms(f.measured.saving_ms)} per step</span>"
    elif f.measured is not None and f.measured.status == "no-gain":
        saving += f"<span class='saving none'>measured: {verified.NO_GAIN}</span>"
    parts = [
        f"<article class='finding {f.severity.label}'><div class='fhead'>"
        f"<span class='badge {f.severity.label}'>{f.severity.label.upper()}</span>"
        f"<code class='rule'>{_e(f.rule)}</code>{rank}{saving}</div>",
        f"<p class='summary'>{_e(f.summary)}</p>",
    ]
    if f.evidence:
        state = " open" if first else ""
        parts.append(
            f"<details{state}><summary>Evidence</summary>{_evidence(f.evidence)}</details>"
        )
    if f.measured is not None:
        parts.append(f"<p class='method'>Measured saving: {_e(verified.measured(f))}</p>")
    label = "Fix" if verified.prescribed(f) else f"Fix ({verified.NO_GAIN}, not prescribed)"
    parts.append(
        f"<div class='fix'><div class='label'>{_e(label)}</div><pre><code>{_e(f.fix)}</code>"
        "</pre></div>"
    )
    if f.locations:
        where = "".join(f"<li><code>{_e(loc)}</code></li>" for loc in f.locations)
        parts.append(f"<div class='label'>Where</div><ul>{where}</ul>")
    parts.append(
        f"<p class='method'>Saving: {_e(facts.saving(f, d))}. Details: "
        f"<code>torchpace explain {_e(f.rule)}</code></p>"
    )
    if f.caveat:
        parts.append(f"<p class='caveat'>{_e(f.caveat)}</p>")
    return "".join(parts) + "</article>"


def _verification_section(d: Diagnosis) -> str:
    """`doctor --verify`: how the fixes were measured, all safe fixes together, what was left."""
    v = d.verification
    if v is None:
        return ""
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(x)}</td></tr>" for k, x in verified.rows(v))
    return (
        f"<section id='verification'><h2>{_e(verified.title(v))}</h2>"
        f"<table class='kv'>{body}</table></section>"
    )


def _evidence(evidence: Mapping[str, EvidenceValue]) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_value(k, v)}</td></tr>" for k, v in evidence.items())
    return f"<table class='evidence'>{rows}</table>"


def _value(key: str, value: EvidenceValue) -> str:
    """An evidence value, formatted by the unit its key names; nested values as lists or tables."""
    if isinstance(value, bool | int | float | str) or value is None:
        return _e(units.evidence_value(key, value))  # the same units as the text report
    if isinstance(value, dict):
        return "; ".join(f"{_e(k)}: {_value(k, v)}" for k, v in value.items())
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return _records(key, [v for v in value if isinstance(v, dict)])
    if isinstance(value, list):
        shown = [_value(key, v) for v in value[:MAX_LIST_ITEMS]]
        more = len(value) - len(shown)
        items = "".join(f"<li>{s}</li>" for s in shown)
        tail = f"<li class='empty'>and {more} more</li>" if more > 0 else ""
        return f"<ul>{items}{tail}</ul>"
    return _e(value)


def _records(key: str, rows: list[dict[str, EvidenceValue]]) -> str:
    """A list of records (top kernels, shapes, ranks) as a small table."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_value(c, row.get(c))}</td>" for c in columns) + "</tr>"
        for row in rows[:MAX_LIST_ITEMS]
    )
    more = len(rows) - MAX_LIST_ITEMS
    tail = f"<p class='empty'>and {more} more</p>" if more > 0 else ""
    return f"<table class='mini'><tr>{head}</tr>{body}</table>{tail}"


def _steps_section(bd: Breakdown, title: str) -> str:
    if not bd.steps:
        return ""
    rows = []
    for phase in Phase:
        ms = bd.median_phase_ms.get(phase, 0.0)
        if ms > 0:
            share, colour = bd.phase_share(phase), plots.PHASE_COLORS[phase]
            rows.append(
                f"<tr><td><span class='tag'><span class='bar' style='width:12px;background:{colour}'>"
                f"</span>{facts.PHASE_LABELS[phase]}</span></td><td class='num'>{units.ms(ms)}</td>"
                f"<td class='num'><span class='bar' style='width:{share * 120:.0f}px'></span>"
                f"{units.share(share)}</td></tr>"
            )
    table = (
        "<table><tr><th>Phase (median step)</th><th class='num'>Time</th>"
        f"<th class='num'>Share</th></tr>{''.join(rows)}</table>"
    )
    return (
        f"<section id='steps'><h2>{_e(title)}</h2>"
        f"<figure>{plots.step_phases_svg(bd)}</figure>{table}</section>"
    )


def _labels_section(d: Diagnosis) -> str:
    """The user's own record_function labels, nested ones indented under their parent."""
    found = d.labels
    if found is None:
        return ""
    head = facts.label_header(found)
    cols = "".join(
        (f"<th class='num'>{_e(h)}</th>" if i else f"<th>{_e(h)}</th>") for i, h in enumerate(head)
    )
    rows = "".join(
        f"<tr><td style='padding-left:{0.4 + 1.2 * depth:.1f}em'><code>{_e(cells[0])}</code></td>"
        + "".join(f"<td class='num'>{_e(c)}</td>" for c in cells[1:])
        + "</tr>"
        for depth, cells in facts.label_rows(found)
    )
    return (
        f"<section id='labels'><h2>{_e(facts.labels_title(found))}</h2>"
        f"<table><tr>{cols}</tr>{rows}</table>"
        f"<p class='method'>{_e(facts.labels_footer(found))}</p></section>"
    )


def _gpu_section(d: Diagnosis, proof: str) -> str:
    bd = d.breakdown
    busy = plots.gpu_busy_svg(bd)
    if busy is None:
        return ""
    classes = plots.kernel_classes_svg(bd)
    share = units.share(bd.gpu_busy_fraction) if bd.gpu_busy_fraction is not None else "n/a"
    extra = (
        f"<h3>GPU time by kernel class</h3><figure class='narrow'>{classes}</figure>"
        if classes
        else ""
    )
    used = (
        f"; its kernels used an estimated {units.share(bd.sm_efficiency)} of the SMs"
        if bd.sm_efficiency is not None
        else ""
    )
    return (
        f"<section id='gpu'><h2>GPU busy {share} of the median step{used}</h2>"
        f"{figures.picture(d, 'idle', proof)}<h3>GPU busy and idle per step</h3>"
        f"<figure>{busy}</figure>{_gpu_steps(bd)}{extra}</section>"
    )


def _gpu_steps(bd: Breakdown) -> str:
    """Per step: GPU busy beside how much of the GPU was used (when the trace records it)."""
    shown = facts.shown_steps(bd)
    if not facts.has_sm(bd) or not shown:
        return ""

    def cell(value: float | None) -> str:
        return f"<td class='num'>{units.share(value) if value is not None else ''}</td>"

    rows = "".join(
        f"<tr><td>{_e(s.index)}</td>{cell(1 - s.gpu_idle_fraction if s.gpu_idle_fraction is not None else None)}"
        f"{cell(s.sm_efficiency)}{cell(s.achieved_occupancy)}<td>{_e(s.outlier)}</td></tr>"
        for s in shown
    )
    return (
        "<table><tr><th>Step</th><th class='num'>GPU busy</th><th class='num'>SM efficiency</th>"
        f"<th class='num'>Achieved occupancy</th><th>Note</th></tr>{rows}</table>"
    )


def _ranks_section(d: Diagnosis, proof: str) -> str:
    ranks, slowest = d.ranks, d.slowest_rank
    if len(ranks) < 2:
        return ""
    waits = any(view.work is not None for view in ranks)
    phases = [p for p in Phase if any(r.breakdown.median_phase_ms.get(p, 0.0) > 0 for r in ranks)]
    head = "".join(f"<th class='num'>{facts.PHASE_LABELS[p]}</th>" for p in phases)
    head += "<th class='num'>Work</th><th class='num'>Waiting in collectives</th>" if waits else ""
    rows = [
        _rank_row(view, position, phases, waits, slowest) for position, view in enumerate(ranks)
    ]
    measure = " by work" if waits else " by median step"
    named = f": rank {_e(slowest)} is the slowest{measure}" if slowest is not None else ""
    return (
        f"<section id='ranks'><h2>Ranks side by side{named}</h2>"
        f"{figures.picture(d, 'ranks', proof)}"
        "<table><tr><th>Rank</th><th class='num'>Steps</th><th class='num'>Median step</th>"
        f"{head}<th class='num'>GPU busy</th></tr>{''.join(rows)}</table></section>"
    )


def _rank_row(
    view: RankView, position: int, phases: list[Phase], waits: bool, slowest: int | None
) -> str:
    bd, rank = view.breakdown, rank_of(view.info, position)
    cells = "".join(
        f"<td class='num'>{units.ms(bd.median_phase_ms.get(p, 0.0))}</td>" for p in phases
    )
    if waits:
        w = view.work
        work, wait = (w.work_ms, w.wait_ms) if w is not None else (float("nan"), float("nan"))
        cells += f"<td class='num'>{units.ms(work)}</td><td class='num'>{units.ms(wait)}</td>"
    busy = units.share(bd.gpu_busy_fraction) if bd.gpu_busy_fraction is not None else "n/a"
    mark = " class='slowest'" if rank == slowest else ""
    return (
        f"<tr{mark}><td>rank {_e(rank)}</td><td class='num'>{len(bd.steps)}</td>"
        f"<td class='num'>{units.ms(bd.median_step_ms)}</td>{cells}<td class='num'>{busy}</td></tr>"
    )


def _skipped_section(d: Diagnosis) -> str:
    """The rules that could not run, one row per cause (report/skipped.py), every rule named."""
    if not d.skipped:
        return ""
    rows = "".join(
        f"<tr><td>{', '.join(f'<code>{_e(rule)}</code>' for rule in g.rules)}</td>"
        f"<td>{_e(g.reason)}</td><td><code>{_e(g.enable)}</code></td></tr>"
        for g in skips.groups(d)
    )
    count = len({s.rule for s in d.skipped})
    return (
        f"<section id='skipped'><h2>Rules that could not run ({count})</h2>"
        "<table><tr><th>Rules</th><th>Why not</th><th>What would let them run</th></tr>"
        f"{rows}</table></section>"
    )


def _open_section(files: Sequence[str]) -> str:
    """How to look at the raw trace: Perfetto (in the browser, file stays local) or TensorBoard."""
    names = "".join(f"<li><code>{_e(p)}</code></li>" for p in files)
    folder = (os.path.dirname(files[0]) if files else "") or "."
    return (
        "<section id='open'><h2>Open the raw trace</h2><ul>" + names + "</ul>"
        "<ol class='how'><li><b>Perfetto</b>: go to <code>https://ui.perfetto.dev</code>, choose "
        "<i>Open trace file</i> and pick the file (<code>.json</code> or <code>.json.gz</code>); "
        "it is read in the browser and not uploaded.</li>"
        "<li><b>Chrome</b>: <code>chrome://tracing</code>, then <i>Load</i>.</li>"
        "<li><b>TensorBoard</b> (its profiler plugin is deprecated but still reads these files): "
        f"<code>pip install torch-tb-profiler; tensorboard --logdir {_e(folder)}</code> "
        "(the file name must end in <code>.pt.trace.json</code> or <code>.pt.trace.json.gz</code>)."
        "</li></ol></section>"
    )
