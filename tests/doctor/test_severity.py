"""The one severity policy (doctor/severity.py, docs/severity.md), applied to every registered rule."""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpace.doctor import registry
from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.severity import HIGH_FRACTION, judge, severity_of
from torchpace.trace import Trace, load_trace
from torchpace.trace.synthetic import TraceBuilder

# The corpus's floor (tests/corpus/readings.py): never HIGH below this share of the step.
FLOOR = 0.03
STEP_MS = 10.0
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _rank(tmp_path: Path, rank: int) -> Trace:
    b = TraceBuilder()
    b.top["distributedInfo"] = {"rank": rank, "world_size": 2}
    for n in range(3):
        b.step(n, n * 10_000, STEP_MS * 1e3)
        b.op("aten::mm", n * 10_000 + 1, 100)
    return load_trace(b.write(tmp_path / f"synthetic_policy_rank{rank}.json"))


# What every rule is made to propose: (tag, proposed severity, saving as a share of the step).
PROPOSALS = (
    ("tiny", Severity.HIGH, 0.01),
    ("large", Severity.LOW, 0.5),
    ("unestimated", Severity.HIGH, None),
    ("too-large", Severity.LOW, 3.0),
    ("negative", Severity.HIGH, -0.2),
)


@pytest.fixture
def every_rule_proposing() -> Iterator[None]:
    """Each registered rule replaced by one returning PROPOSALS under its own name."""
    # Load every rule before saving the registry: saved first, in a process that had not loaded
    # them yet, the restore left later tests in that process (xdist) without rules.
    specs = registry.all_rules()
    saved = dict(registry._RULES)
    for spec in specs:

        def propose(arg: object, *, _name: str = spec.name, **_: Any) -> list[Finding]:
            return [
                Finding(_name, sev, tag, {}, "-", None if share is None else share * STEP_MS)
                for tag, sev, share in PROPOSALS
            ]

        registry._RULES[spec.name] = replace(spec, func=propose)
    yield
    registry._RULES.clear()
    registry._RULES.update(saved)


def test_every_registered_rule_is_judged_by_the_policy(
    tmp_path: Path, every_rule_proposing: None
) -> None:
    live: Any = object()  # the fake rules never read it; diagnose only needs it to run live rules
    found = diagnose([_rank(tmp_path, 0), _rank(tmp_path, 1)], live=live).findings
    specs = {s.name: s for s in registry.all_rules()}
    assert {f.rule for f in found} == set(specs)
    for f in found:
        spec = specs[f.rule]
        if f.saving_method.startswith("not estimated: this rank mostly waits"):
            assert f.severity is Severity.LOW  # the cross-rank pass demoted a waiting rank's comm
            continue
        expected = {
            "tiny": Severity.LOW,
            "large": Severity.HIGH,
            "unestimated": Severity.HIGH if spec.input == "live" else Severity.MEDIUM,
            "too-large": Severity.HIGH,
        }.get(f.summary)
        assert expected is None or f.severity is expected, (f.rule, f.summary)
        if f.summary == "too-large":
            assert f.saving_ms == STEP_MS and "cut to the step" in f.caveat
        if f.summary == "negative":
            assert f.saving_ms is None and "not a valid" in f.caveat
        if f.severity is Severity.HIGH and spec.input != "live":
            assert f.saving_ms is not None and f.saving_ms >= FLOOR * STEP_MS, f.rule


def test_every_live_rule_is_named_in_the_policy_page() -> None:
    """A live finding without an estimate keeps its rule's severity: the page must say why."""
    page = (DOCS / "severity.md").read_text()
    for spec in registry.all_rules("live"):
        assert f"`{spec.name}`" in page, f"docs/severity.md does not explain {spec.name}"


def test_policy_page_is_linked() -> None:
    for doc in ("doctor.md", "cli.md"):
        assert "severity.md" in (DOCS / doc).read_text(), doc


@given(
    saving=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    step=st.floats(0, 1e7),
    proposed=st.sampled_from(list(Severity)),
    live=st.booleans(),
)
def test_judged_findings_are_sane(
    saving: float | None, step: float, proposed: Severity, live: bool
) -> None:
    f = judge(Finding("r", proposed, "s", {}, "-", saving), step, live=live)
    if f.saving_ms is not None:
        assert math.isfinite(f.saving_ms) and f.saving_ms >= 0
        assert step <= 0 or f.saving_ms <= step
    if f.severity is Severity.HIGH and not live:
        assert f.saving_ms is not None and step > 0 and f.saving_ms >= HIGH_FRACTION * step
    if f.saving_ms is not None and step > 0:
        assert f.saving_fraction == f.saving_ms / step and 0 <= f.saving_fraction <= 1
    else:
        assert f.saving_fraction is None


def test_no_trace_rule_proposes_high() -> None:
    """A trace finding is HIGH only from its saving (judge): a rule that proposes HIGH writes a
    branch that can never win."""
    proposing = {
        spec.name
        for spec in registry.all_rules()
        if spec.input != "live"
        and "Severity.HIGH" in inspect.getsource(sys.modules[spec.func.__module__])
    }
    assert proposing == set()


def test_bands() -> None:
    assert severity_of(0.0) is Severity.LOW
    assert severity_of(0.029) is Severity.LOW
    assert severity_of(0.03) is Severity.MEDIUM
    assert severity_of(0.099) is Severity.MEDIUM
    assert severity_of(HIGH_FRACTION) is Severity.HIGH
