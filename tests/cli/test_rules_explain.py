"""`torchpace rules` lists every rule; `torchpace explain RULE` prints its page."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from torchpace.doctor.registry import all_rules

Cli = Callable[..., Any]  # conftest's cli fixture: (code, out, err) of one run
PAGES = Path(__file__).resolve().parents[2] / "src" / "torchpace" / "docs" / "rules"
FIRST_RULES = ("allocator-churn", "dataloader-stall", "gpu-idle", "pageable-copy", "sync-point")


def test_rules_lists_every_rule_with_what_it_reads_and_thresholds(cli: Cli) -> None:
    result = cli("rules", "--json")
    listed = {r["rule"]: r for r in json.loads(result.out)["rules"]}
    specs = all_rules()
    assert set(listed) == {s.name for s in specs} >= set(FIRST_RULES)
    text = cli("rules").out
    for spec in specs:
        assert f"\n  {spec.name}" in text
        assert listed[spec.name]["summary"] == spec.summary
        assert listed[spec.name]["reads"].split("+")[0] == spec.input
        assert listed[spec.name]["thresholds"] == {k: v for k, v in spec.thresholds().items()}
    assert (
        text.index("Read from a trace")
        < text.index("  dataloader-stall")
        < text.index("Live objects (torchpace doctor only)")
    )
    assert "  dataloader-stall  (+ live facts under doctor)\n" in text
    assert all(len(line) <= 100 for line in text.splitlines())


def test_rules_shows_a_new_rules_thresholds(cli: Cli, crashing_rule: str) -> None:
    out = cli("rules").out
    assert (
        "\n  crashing-rule\n      Always raises (a test rule)\n      thresholds: min_ms=1.0\n"
        in out
    )


def test_rules_as_json(cli: Cli, crashing_rule: str) -> None:
    rules = json.loads(cli("rules", "--json").out)["rules"]
    (fake,) = [r for r in rules if r["rule"] == crashing_rule]
    assert fake == {
        "rule": "crashing-rule",
        "reads": "trace",
        "summary": "Always raises (a test rule)",
        "enabled": True,
        "disabled_by": None,
        "thresholds": {"min_ms": 1.0},
        "threshold_sources": {"min_ms": "default"},
    }


@pytest.mark.parametrize("rule", sorted(spec.name for spec in all_rules()))
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


def test_explain_on_a_colour_terminal_renders_the_markdown(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    screen = Terminal()
    monkeypatch.setattr(sys, "stdout", screen)
    assert cli("explain", "sync-point").code == 0
    shown = screen.getvalue()
    assert "\x1b[" in shown and "sync" in shown.lower()
    heading = (PAGES / "sync-point.md").read_text(encoding="utf-8").splitlines()[0]
    assert heading.startswith("# ") and heading not in shown  # drawn, not printed as Markdown
