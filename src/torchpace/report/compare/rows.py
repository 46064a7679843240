"""What every compare reporter shows, as rows of strings: one wording for text, Markdown and HTML."""

from __future__ import annotations

from torchpace.compare import Comparison, FindingRef, NamedChange
from torchpace.report import units
from torchpace.report.verified import VERDICT

CHANGE_HEAD = ["", "before", "after", "change [95%]", "verdict"]
MIN_EFFECT_TEXT = "real but under 3% of the step"


def side_rows(c: Comparison) -> list[list[str]]:
    """What each side is: path, kind, device, ranks, typical steps and median step."""
    rows = []
    medians = (c.step_change.before_ms, c.step_change.after_ms)
    for label, side, median in zip(("before", "after"), (c.before, c.after), medians, strict=True):
        ranks = f", {side.ranks} ranks (the slowest speaks)" if side.ranks > 1 else ""
        rows.append(
            [
                label,
                f"{side.path} ({side.kind}, {side.device}{ranks}, {len(side.step_ms)} typical "
                f"steps, median step {units.ms(median)})",
            ]
        )
    return rows


def change_cells(item: NamedChange) -> list[str]:
    """name, before, after, `-65.1 ms [-71.1, -64.3]`, verdict."""
    ch = item.change
    return [
        item.name,
        units.ms(ch.before_ms),
        units.ms(ch.after_ms),
        f"{_signed(ch.delta_ms)} [{_signed(ch.delta_low_ms)}, {_signed(ch.delta_high_ms)}]",
        verdict_text(item),
    ]


def verdict_text(item: NamedChange) -> str:
    """The verdict; a change whose interval excludes zero but is negligible says so."""
    ch = item.change
    if ch.reason == "negligible":
        return MIN_EFFECT_TEXT
    if ch.reason == "few samples":
        return "too few steps to decide"
    return VERDICT[ch.verdict]


def step_cells(c: Comparison) -> list[str]:
    """The step time as the first row of the phase table."""
    return change_cells(NamedChange("whole step", c.step_change))


def _signed(value: float) -> str:
    text = units.ms(value)
    return text if value < 0 else f"+{text}"


def finding_text(f: FindingRef) -> str:
    """`dataloader-stall (high, saves ~63.5 ms/step, rank 1): summary`."""
    saving = f", saves ~{units.ms(f.saving_ms)}/step" if f.saving_ms is not None else ""
    rank = f", rank {f.rank}" if f.rank is not None else ""
    return f"{f.rule} ({f.severity}{saving}{rank}): {f.summary}"


def findings_rows(c: Comparison) -> list[tuple[str, str]]:
    """(status, text) for every finding: resolved, new, changed (before -> after), unchanged."""
    f = c.findings
    rows = [("resolved", finding_text(x)) for x in f.resolved]
    rows += [("new", finding_text(x)) for x in f.new]
    for pair in f.changed:
        b, a = pair.before, pair.after
        severity = a.severity if a.severity == b.severity else f"{b.severity} -> {a.severity}"
        text = f"{b.rule}: {severity}, saving {_saving(b)} -> {_saving(a)}; now: {a.summary}"
        rows.append(("changed", text))
    rows += [("unchanged", finding_text(x)) for x in f.unchanged]
    return rows


def _saving(f: FindingRef) -> str:
    return units.ms(f.saving_ms) if f.saving_ms is not None else "n/a"


def missing_table(name: str, c: Comparison) -> str:
    """Why a kernel or operator table is absent."""
    kinds = {c.before.kind, c.after.kind}
    if "report" in kinds:
        return f"no {name} table: a JSON report holds no per-event times; compare the traces"
    return f"no {name} table: a side recorded none (a CPU-only run has no kernels)"
