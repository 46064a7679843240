"""Every recorded trace loads and diagnoses without error (the large one once per session)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.trace import Trace

FIXTURES = Path(__file__).parents[1] / "fixtures" / "traces"
ALL = sorted(str(p.relative_to(FIXTURES))[: -len(".json.gz")] for p in FIXTURES.rglob("*.json.gz"))


def test_every_shared_trace_is_a_fixture() -> None:
    shared = Path("/work/shared/traces")
    if not shared.is_dir():
        pytest.skip("the shared trace store is not on this machine")
    assert len(ALL) >= len(list(shared.rglob("*.json.gz")))


@pytest.mark.parametrize("name", ALL)
def test_loads_and_diagnoses(trace_fixture: Callable[[str], Trace], name: str) -> None:
    trace = trace_fixture(name)
    diagnosis = diagnose(trace)
    assert diagnosis.breakdown.steps
    assert not [s for s in diagnosis.skipped if "rule failed" in s.reason]
    for finding in diagnosis.findings:
        assert any(ch.isdigit() for ch in finding.summary), finding
        assert all("_" in key for key in finding.evidence), finding  # a unit suffix in every key
