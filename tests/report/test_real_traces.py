"""Every recorded trace renders in every format; the JSON keeps its promises on real data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report import render
from torchpace.trace import load_traces

TRACES = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "traces").glob("*/*.json.gz"))
ANSI = re.compile(r"\x1b\[")


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def real(request: pytest.FixtureRequest) -> Diagnosis:
    return diagnose(load_traces(request.param))


def test_fixtures_are_there() -> None:
    assert len(TRACES) >= 8


def test_renders_in_every_format(real: Diagnosis) -> None:
    text = render(real, "text")
    title = real.info.path if not real.ranks else f"({len(real.ranks)} traces)"
    first = text.splitlines()[0]
    assert first.startswith("torchpace report: ") and first.endswith(title)
    assert not ANSI.search(text)
    assert ANSI.search(render(real, "text", color=True, width=120))
    assert render(real, "md").startswith("## torchpace report: `")
    for finding in real.findings:
        assert f"] {finding.rule}" in text


def test_json_savings_have_baseline_and_device(real: Diagnosis) -> None:
    doc = json.loads(render(real, "json"))
    header = doc["header"]
    assert header["step_count"] == len(real.breakdown.steps) >= 1
    for finding in doc["findings"]:
        if finding["saving_ms"] is not None:
            assert finding["baseline_step_ms"] > 0
            assert header["device_kind"] == "cpu" or header["device_name"]
    savings = [f["saving_ms"] if f["saving_ms"] is not None else -1 for f in doc["findings"]]
    assert savings == sorted(savings, reverse=True)
