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


def test_gpu_used_beside_gpu_busy_in_every_format() -> None:
    # The recorded V100 ResNet-50 trace records blocks per SM and occupancy on its kernels.
    traces = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
    d = diagnose(load_traces(traces / "loader_workers" / "resnet50_v100_num_workers_0.json.gz"))
    bd = d.breakdown
    assert bd.sm_efficiency is not None and bd.achieved_occupancy is not None
    assert bd.gpu_busy_fraction is not None and 0 < bd.sm_efficiency <= bd.gpu_busy_fraction
    doc = json.loads(render(d, "json"))
    assert doc["header"]["sm_efficiency_fraction"] == pytest.approx(bd.sm_efficiency, abs=1e-6)
    assert doc["header"]["achieved_occupancy_fraction"] is not None
    assert all("sm_efficiency_fraction" in s for s in doc["breakdown"]["steps"])
    text = render(d, "text", width=200)
    assert re.search(r"GPU used +SM efficiency \d+% of the step, achieved occupancy \d+%", text)
    assert "SM eff." in text  # the per-step column
    assert "| GPU used | SM efficiency" in render(d, "md")
    assert "SM efficiency" in render(d, "html")


def test_gpu_used_says_when_the_trace_lacks_the_fields() -> None:
    traces = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
    d = diagnose(load_traces(traces / "rocm" / "mi250_minitoy_rocm6.2.json.gz"))
    assert "GPU used" in render(d, "text") and "record no blocks per SM" in render(d, "text")
    assert json.loads(render(d, "json"))["header"]["sm_efficiency_fraction"] is None
