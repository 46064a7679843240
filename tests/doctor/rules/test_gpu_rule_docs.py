"""Every GPU rule has its page, says how its saving is estimated, and is registered as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpace.doctor.registry import get_rule

DOCS = Path(__file__).parents[3] / "src" / "torchpace" / "docs" / "rules"
GPU_RULES = [
    "no-mixed-precision",
    "tensor-core-unfriendly-shape",
    "tf32-disabled",
    "launch-bound",
    "comm-bound",
    "comm-overlap",
    "rank-imbalance",
    "memory-pressure",
    "low-sm-efficiency",
]


@pytest.mark.parametrize("name", GPU_RULES)
def test_page_states_what_the_saving_is(name: str) -> None:
    page = (DOCS / f"{name}.md").read_text(encoding="utf-8")
    assert page.startswith(f"# {name}\n")
    assert "**Saving estimate (" in page  # an estimate, an upper bound, or none, and why
    assert "**Fix.**" in page and "**Thresholds.**" in page
    for threshold in get_rule(name).thresholds():
        assert threshold in page, f"{name}.md does not document {threshold}"


def test_registration() -> None:
    assert get_rule("rank-imbalance").input == "ranks"
    assert get_rule("no-mixed-precision").live and get_rule("tf32-disabled").live
    assert all(get_rule(n).input == "trace" for n in GPU_RULES if n != "rank-imbalance")
