"""The rule registry: names, discovery and thresholds."""

from __future__ import annotations

import pytest

from torchpace.doctor.finding import Finding, Severity, sort_findings
from torchpace.doctor.registry import get_rule, rule


def test_rejects_names_that_are_not_kebab_case() -> None:
    with pytest.raises(ValueError, match="not kebab-case"):
        rule("Dataloader_Stall")


def test_unknown_rule_names_the_command_that_lists_them() -> None:
    with pytest.raises(ValueError, match="unknown rule 'no-such-rule'; run 'torchpace rules'"):
        get_rule("no-such-rule")


def test_severity_parse_names_the_choices() -> None:
    assert Severity.parse("Medium") is Severity.MEDIUM
    with pytest.raises(ValueError, match="choose one of: low, medium, high"):
        Severity.parse("urgent")


def test_findings_sort_by_saving_then_severity() -> None:
    def make(rule_name: str, saving: float | None, sev: Severity) -> Finding:
        return Finding(rule_name, sev, "s", {}, "fix", saving_ms=saving)

    ordered = sort_findings(
        [
            make("a", None, Severity.HIGH),
            make("b", 2.0, Severity.LOW),
            make("c", 9.0, Severity.LOW),
            make("d", 2.0, Severity.HIGH),
        ]
    )
    assert [f.rule for f in ordered] == ["c", "d", "b", "a"]
