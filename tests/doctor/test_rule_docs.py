"""The doc-page contract, over every registered rule: `torchpace explain RULE` has a page to print,
and the page says what the rule detects, why it is slow, an example, the fix, how the saving is
estimated (or why there is none), the known false positives, and every threshold it takes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchpace.doctor.registry import all_rules, get_rule

DOCS = Path(__file__).parents[2] / "src" / "torchpace" / "docs" / "rules"
RULES = sorted(spec.name for spec in all_rules())
# Each part of a page, as a `## Heading` section or a `**Heading.**` paragraph.
PARTS = {
    "what it detects": r"What it detects",
    "why it is slow": r"Why it is slow",
    "example": r"Example",
    "fix": r"Fix",
    "saving": r"How the saving is estimated|Saving estimate \(",
    "false positives": r"Known false positives",
}


def test_every_page_belongs_to_a_rule() -> None:
    assert sorted(p.stem for p in DOCS.glob("*.md")) == RULES


@pytest.mark.parametrize("name", RULES)
def test_page_has_every_part(name: str) -> None:
    page = (DOCS / f"{name}.md").read_text(encoding="utf-8")
    assert page.startswith(f"# {name}\n")
    for part, heading in PARTS.items():
        found = re.search(rf"^(## (?:{heading})|\*\*(?:{heading}))", page, re.M)
        assert found, f"{name}.md has no '{part}' part"


@pytest.mark.parametrize("name", RULES)
def test_page_documents_every_threshold(name: str) -> None:
    page = (DOCS / f"{name}.md").read_text(encoding="utf-8")
    for threshold in get_rule(name).thresholds():
        assert threshold in page, f"{name}.md does not document {threshold}"


def test_registration() -> None:
    assert get_rule("rank-imbalance").input == "ranks"
    assert get_rule("no-mixed-precision").live and get_rule("tf32-disabled").live
    assert get_rule("dataloader-stall").input == "trace"
