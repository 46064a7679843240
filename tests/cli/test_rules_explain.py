"""`torchpace rules` lists every rule; `torchpace explain RULE` prints its page."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from torchpace.doctor.registry import all_rules

Cli = Callable[..., Any]  # conftest's cli fixture: (code, out, err) of one run
PAGES = Path(__file__).resolve().parents[2] / "src" / "torchpace" / "docs" / "rules"
FIRST_RULES = ("allocator-churn", "dataloader-stall", "gpu-idle", "pageable-copy", "sync-point")


@pytest.mark.usefixtures("first_rules")
def test_rules_lists_every_rule_with_what_it_reads_and_thresholds(cli: Cli) -> None:
    result = cli("rules")
    assert result.code == 0
    specs = all_rules()
    assert {s.name for s in specs} >= set(FIRST_RULES)
    for spec in specs:
        (line,) = [ln for ln in result.out.splitlines() if ln.startswith(spec.name + " ")]
        assert f"reads {spec.input}" in line and spec.summary in line
        for name, default in spec.thresholds().items():
            assert f"{name}={default!r}" in result.out


def test_rules_shows_a_new_rules_thresholds(cli: Cli, crashing_rule: str) -> None:
    out = cli("rules").out
    assert "crashing-rule" in out and "Always raises (a test rule)" in out
    assert "thresholds: min_ms=1.0" in out


def test_rules_as_json(cli: Cli, crashing_rule: str) -> None:
    rules = json.loads(cli("rules", "--json").out)["rules"]
    (fake,) = [r for r in rules if r["rule"] == crashing_rule]
    assert fake == {
        "rule": "crashing-rule",
        "reads": "trace",
        "summary": "Always raises (a test rule)",
        "thresholds": {"min_ms": 1.0},
    }


@pytest.mark.usefixtures("first_rules")
@pytest.mark.parametrize("rule", FIRST_RULES)
def test_explain_prints_the_rule_page(cli: Cli, rule: str) -> None:
    result = cli("explain", rule)
    assert result.code == 0
    assert result.out == (PAGES / f"{rule}.md").read_text(encoding="utf-8")


def test_explain_unknown_rule_names_torchpace_rules(cli: Cli) -> None:
    result = cli("explain", "no-such-rule")
    assert result.code == 2
    assert (
        result.err
        == "torchpace: error: unknown rule 'no-such-rule'; run 'torchpace rules' to list them\n"
    )


def test_explain_a_rule_without_a_page(cli: Cli, crashing_rule: str) -> None:
    result = cli("explain", crashing_rule)
    assert result.code == 2
    assert result.err == (
        "torchpace: error: rule 'crashing-rule' has no page (torchpace/docs/rules/crashing-rule.md "
        "is missing from this install); 'torchpace rules' shows its summary and thresholds\n"
    )
