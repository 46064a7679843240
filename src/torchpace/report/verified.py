"""How reports word what `doctor --verify` measured: per finding, and the verification as a whole.

Shared by the text, Markdown and HTML reporters (JSON carries the numbers in report/jsondoc.py).
A speedup is never shown without its baseline: plain and fixed step times, runs, the interval.
"""

from __future__ import annotations

from torchpace.doctor.finding import Finding
from torchpace.doctor.verification import ArmFigures, MeasuredSaving, Verification
from torchpace.report import units

NO_GAIN = "no gain here"
# How every report words a measured verdict (measure.stats.Verdict): --verify, compare.
VERDICT = {
    "faster": "faster",
    "slower": "slower",
    "no-change": "no measurable change",
    "inconclusive": "inconclusive",
}


def speedup(f: ArmFigures) -> str:
    """'1.92x [1.71-2.10] (plain 30.1 ms, runs 29.0-31.2 -> fixed 15.7 ms, runs 15.1-16.4)'."""
    return (
        f"{f.speedup:.2f}x [{f.speedup_low:.2f}-{f.speedup_high:.2f}, 95%] "
        f"(plain {units.ms(f.baseline_ms)}, runs {units.ms(f.baseline_low_ms)}-"
        f"{units.ms(f.baseline_high_ms)} -> {units.ms(f.fixed_ms)}, runs "
        f"{units.ms(f.fixed_low_ms)}-{units.ms(f.fixed_high_ms)}; {f.runs} run(s) each side)"
    )


def _candidate(f: ArmFigures) -> str:
    if f.verdict == "inconclusive":  # its interval says nothing: no ratio
        return f"{f.label}: inconclusive"
    return f"{f.label}: {f.speedup:.2f}x, {VERDICT[f.verdict]}"


def measured(finding: Finding) -> str:
    """The measured saving beside the estimate, in one paragraph; "" when not verified."""
    m = finding.measured
    if m is None:
        return ""
    if m.status in ("failed", "no-time", "needs-code", "inconclusive"):
        keeps = " (the estimate stands)" if finding.saving_ms is not None else ""
        what = f"{m.fix}: " if m.fix and m.status != "needs-code" else ""
        head = "the fixed run failed: " if m.status == "failed" else ""
        return f"{what}{head}{m.note}{keeps}"
    assert m.best is not None
    best = m.best
    if m.status == "measured":
        text = (
            f"{units.ms(best.saving_ms)} per step with {best.label}: {speedup(best)}"
            f"{_against_estimate(finding, best)}"
        )
    else:
        text = (
            f"{NO_GAIN}: {VERDICT[best.verdict]}, best {best.label} {speedup(best)}; not prescribed"
        )
    if len(m.tried) > 1:
        text += "; tried " + ", ".join(_candidate(t) for t in m.tried)
    if best.flags:
        text += "; " + "; ".join(best.flags)
    if m.note:
        text += f"; {m.note}"
    return f"{text}. {numerics(m)}"


def numerics(m: MeasuredSaving) -> str:
    """Whether the fix changes the math."""
    return f"Numerics change: {m.numerics}." if m.numerics else "Same math (numerics unchanged)."


def _against_estimate(finding: Finding, best: ArmFigures) -> str:
    if finding.saving_ms is None:
        return "; no estimate to compare"
    if best.saving_ms <= 0:
        return ""
    error = (finding.saving_ms - best.saving_ms) / best.saving_ms
    return f"; estimated {units.ms(finding.saving_ms)} ({error:+.0%} off)"


def prescribed(finding: Finding) -> bool:
    """False when --verify measured the fix and it did not help here."""
    return finding.measured is None or finding.measured.status != "no-gain"


def title(v: Verification) -> str:
    """The section's title."""
    return "Verification: each fix measured on fresh, unprofiled runs of this script"


def rows(v: Verification) -> list[tuple[str, str]]:
    """What was measured and how, as label-value rows."""
    out = [
        (
            "Method",
            f"{v.warmup_steps} warm-up + {v.steps} timed steps per run, every run a fresh "
            f"process; {v.rounds} round(s) interleaved (plain, fix, fix, ..., plain); 95% "
            "intervals; inside the noise = no measurable change",
        )
    ]
    if v.baseline_ms > 0:
        out.append(("Plain script", _plain(v)))
    if v.combined is not None:
        out.append(("All safe fixes", f"{', '.join(v.combined_fixes)}: {speedup(v.combined)}"))
    if v.load:
        out.append(("Machine", v.load))
    if v.load_warning:
        out.append(("Warning", v.load_warning))
    if v.not_measured:
        out.append(
            ("Not measured", "for lack of time (--verify-budget): " + ", ".join(v.not_measured))
        )
    for fix, why in v.failed:
        out.append(("Failed", f"{fix}: {why}"))
    out += [("Note", note) for note in v.notes]
    out.append(("Took", f"{v.total_s:.0f} s of a {v.budget_s:.0f} s budget"))
    return out


def _plain(v: Verification) -> str:
    text = (
        f"{units.ms(v.baseline_ms)} per step unprofiled (runs {units.ms(v.baseline_low_ms)}-"
        f"{units.ms(v.baseline_high_ms)})"
    )
    ratio = v.profiler_ratio
    if ratio is not None and v.profiled_step_ms is not None:
        text += (
            f"; {units.ms(v.profiled_step_ms)} profiled in the diagnosis: the profiler's own "
            f"effect {ratio:.2f}x"
        )
    return text
