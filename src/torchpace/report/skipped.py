"""Rules that could not run, grouped by why: one line per cause instead of one per rule.

A CPU-only run skips every rule that judges GPU work; listing each with the same advice buries the
report's end in repeats. Reports show the groups (text, rich, Markdown, HTML); the JSON report and
`--verbose` keep every rule with its own reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Skipped

# How rules say they saw no GPU work (their reasons are theirs to word; this reads them).
_NO_GPU_WORK = ("no GPU", "no device activity", "no CUDA", "on the CPU", "GPUs only")
_WATCH = "was watched"  # "no step was watched (...)", "no model was watched (...)"
_RECORD_GPU = "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])"
MAX_NAMED = 3  # a group of more rules is counted, not named (--verbose names them)


@dataclass(frozen=True)
class SkipGroup:
    """Rules skipped for one cause: what is missing, and what would let them run ("" if nothing)."""

    rules: tuple[str, ...]
    reason: str
    enable: str

    def label(self) -> str:
        """The rules' ids, or their count when there are many."""
        if len(self.rules) <= MAX_NAMED:
            return ", ".join(self.rules)
        return f"{len(self.rules)} rules"


def _cause(skipped: Skipped, diagnosis: Diagnosis) -> tuple[str, str]:
    """(reason, enable) shared by every rule skipped for the same cause."""
    gpu_less = diagnosis.info.device_kind == "cpu" and not diagnosis.ranks
    if gpu_less and (
        "ProfilerActivity.CUDA" in skipped.enable
        or any(words in skipped.reason for words in _NO_GPU_WORK)
    ):
        if diagnosis.script:  # the doctor recorded CUDA had there been any: nothing to add
            return "they judge GPU work, and this run did none", ""
        return "they judge GPU work, which the trace did not record", _RECORD_GPU
    if _WATCH in skipped.reason:
        reason = (
            "the doctor watched no step (torch.compile, time-window steps or --warmup 0 skip "
            "the watch)"
        )
        return reason, skipped.enable
    return skipped.reason.rstrip("."), skipped.enable


def groups(diagnosis: Diagnosis) -> list[SkipGroup]:
    """The skipped rules grouped by cause, largest group first, rules by name within a group."""
    by_cause: dict[tuple[str, str], list[str]] = {}
    for item in diagnosis.skipped:
        by_cause.setdefault(_cause(item, diagnosis), []).append(item.rule)
    found = [
        SkipGroup(tuple(sorted(dict.fromkeys(rules))), reason, enable)
        for (reason, enable), rules in by_cause.items()
    ]
    return sorted(found, key=lambda g: (-len(g.rules), g.rules))


def title(diagnosis: Diagnosis, *, verbose: bool = False) -> str:
    """'Not analysed (11 rules; --verbose lists each)': the hint only when a group hides names."""
    count = len({s.rule for s in diagnosis.skipped})
    plural = "s" if count != 1 else ""
    hidden = not verbose and any(len(g.rules) > MAX_NAMED for g in groups(diagnosis))
    where = "the JSON report" if diagnosis.script else "--verbose"  # analyze has --verbose
    hint = f"; {where} lists each" if hidden else ""
    return f"Not analysed ({count} rule{plural}{hint})"


def line(group: SkipGroup) -> str:
    """'9 rules: they judge GPU work, and this run did none' (with what would enable them)."""
    text = f"{group.label()}: {group.reason}"
    return f"{text}; to enable: {group.enable}" if group.enable else text
