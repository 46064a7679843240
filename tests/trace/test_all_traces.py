"""Every recorded trace loads and diagnoses without error (the large one once per session)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.trace import Trace

FIXTURES = Path(__file__).parents[1] / "fixtures" / "traces"
CORPUS = Path(__file__).parents[1] / "fixtures" / "corpus"  # judged by tests/corpus
ALL = sorted(str(p.relative_to(FIXTURES))[: -len(".json.gz")] for p in FIXTURES.rglob("*.json.gz"))


def _shared_traces() -> Path | None:
    # The team's trace store sits beside the checkout (../shared), in CI as on a developer machine.
    for root in (Path(__file__).parents[3] / "shared", Path("/work/shared")):
        if (root / "traces").is_dir():
            return root / "traces"
    return None


def _digests(paths: list[Path]) -> set[str]:
    return {hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_every_shared_trace_is_a_fixture() -> None:
    shared = _shared_traces()
    if shared is None:
        pytest.skip("the shared trace store (../shared/traces) is not beside this checkout")
    missing = _digests(list(shared.rglob("*.json.gz"))) - _digests(
        [*FIXTURES.rglob("*.gz"), *CORPUS.rglob("*.gz")]
    )
    assert not missing, f"{len(missing)} shared trace(s) have no copy in tests/fixtures/"


@pytest.mark.parametrize("name", ALL)
def test_loads_and_diagnoses(trace_fixture: Callable[[str], Trace], name: str) -> None:
    trace = trace_fixture(name)
    diagnosis = diagnose(trace)
    assert diagnosis.breakdown.steps
    assert not [s for s in diagnosis.skipped if "rule failed" in s.reason]
    for finding in diagnosis.findings:
        assert any(ch.isdigit() for ch in finding.summary), finding
        assert all("_" in key for key in finding.evidence), finding  # a unit suffix in every key
