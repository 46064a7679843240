"""The JSON report: versioned, a unit in every key, deterministic, sorted by saving."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from torchpace import __version__
from torchpace.doctor.diagnosis import SCHEMA_VERSION, Diagnosis
from torchpace.doctor.finding import Finding
from torchpace.report import render

# Numeric keys that are counts, indices or identifiers: no unit to name.
UNITLESS = {
    "schema_version",
    "index",
    "line",
    "count",
    "rank",
    "world_size",
    "slowest_rank",
    "step_count",
    "event_count",
}
UNITS = ("_ms", "_us", "_fraction", "_bytes", "_count")


def numeric_keys(node: Any, path: str = "") -> Iterator[str]:
    """Every key holding a number, outside the rules' own evidence (rules name their units)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in (
                "evidence",
                "phase_ms",
                "median_phase_ms",
                "median_phase_fraction",
                "kernel_ms_by_class",
            ):
                continue  # keyed by name under a parent key that carries the unit
            if isinstance(value, int | float) and not isinstance(value, bool):
                yield key
            yield from numeric_keys(value, f"{path}.{key}")
    elif isinstance(node, list):
        for item in node:
            yield from numeric_keys(item, path)


def test_round_trips_with_schema_version_and_tool(diagnosis: Diagnosis) -> None:
    doc = json.loads(render(diagnosis, "json"))
    assert list(doc) == [
        "schema_version",
        "tool",
        "version",
        "header",
        "breakdown",
        "user_labels",
        "findings",
        "skipped",
        "ranks",
        "slowest_rank",
        "notes",
    ]
    assert doc["schema_version"] == SCHEMA_VERSION
    assert (doc["tool"], doc["version"]) == ("torchpace", __version__)


def test_every_number_has_a_unit_in_its_key(diagnosis: Diagnosis, multirank: Diagnosis) -> None:
    for d in (diagnosis, multirank):
        keys = set(numeric_keys(json.loads(render(d, "json"))))
        assert keys, "the walk found nothing: the test would pass vacuously"
        missing = {k for k in keys if k not in UNITLESS and not k.endswith(UNITS)}
        assert not missing


def test_header_states_what_was_measured(diagnosis: Diagnosis) -> None:
    header = json.loads(render(diagnosis, "json"))["header"]
    assert header["trace_files"] == ["traces/resnet50.pt.trace.json.gz"]
    assert header["device_kind"] == "cuda"
    assert header["device_name"] == "Tesla V100-DGXS-32GB"
    assert header["compute_capability"] == "7.0"
    assert header["device_memory_bytes"] == 34_089_730_048
    assert header["torch_version"] is None
    assert header["step_source"] == "profiler-step"
    assert header["step_count"] == 5
    assert header["median_step_ms"] == 121.2
    assert header["gpu_busy_fraction"] == 0.3


def test_breakdown_has_medians_and_every_step(diagnosis: Diagnosis) -> None:
    bd = json.loads(render(diagnosis, "json"))["breakdown"]
    assert list(bd["median_phase_ms"]) == [
        "dataloader",
        "h2d",
        "sync",
        "forward",
        "backward",
        "optimizer",
        "other",
    ]
    assert bd["median_phase_fraction"]["dataloader"] == 0.5
    assert [s["index"] for s in bd["steps"]] == [0, 1, 2, 3, 4]
    assert bd["steps"][4]["outlier"] == "3.1x the median"
    assert bd["steps"][0]["gpu_idle_fraction"] == 0.7
    assert bd["kernel_ms_by_class"]["conv"] == 20.0


def test_findings_sorted_by_saving_with_every_field(diagnosis: Diagnosis) -> None:
    findings = json.loads(render(diagnosis, "json"))["findings"]
    assert [f["rule"] for f in findings] == ["dataloader-stall", "pageable-copy", "allocator-churn"]
    stall = findings[0]
    assert list(stall) == [
        "rule",
        "severity",
        "summary",
        "evidence",
        "saving_ms",
        "saving_fraction",
        "baseline_step_ms",
        "saving_method",
        "fix",
        "locations",
        "rank",
        "caveat",
        "measured",
    ]
    assert stall["severity"] == "high"
    assert stall["evidence"] == {
        "wait_fraction": 0.5,
        "wait_ms": 60.0,
        "num_workers": 0,
        "batches": [1, 2, 3],
    }
    assert stall["saving_ms"] == 42.0
    assert stall["locations"] == [{"file": "train.py", "line": 42, "function": "main", "count": 6}]
    assert findings[2]["saving_ms"] is None and findings[2]["saving_fraction"] is None


def test_a_saving_always_comes_with_its_baseline_and_device(
    diagnosis: Diagnosis, multirank: Diagnosis, cpu_diagnosis: Diagnosis
) -> None:
    for d in (diagnosis, multirank, cpu_diagnosis):
        doc = json.loads(render(d, "json"))
        savings = [f for f in doc["findings"] if f["saving_ms"] is not None]
        assert savings
        assert doc["header"]["median_step_ms"] > 0
        assert doc["header"]["device_kind"] in ("cpu", "cuda", "rocm")
        assert doc["header"]["device_kind"] == "cpu" or doc["header"]["device_name"]
        for f in savings:
            assert f["baseline_step_ms"] > 0
            assert f["saving_fraction"] == round(f["saving_ms"] / f["baseline_step_ms"], 6)
            assert f["saving_method"]


def test_a_rank_finding_is_measured_against_its_rank(multirank: Diagnosis) -> None:
    doc = json.loads(render(multirank, "json"))
    (stall,) = doc["findings"]
    assert stall["rank"] == 1
    assert stall["baseline_step_ms"] == 144.0
    assert doc["slowest_rank"] == 1
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert doc["ranks"][0]["header"]["median_step_ms"] == 120.0
    assert doc["ranks"][1]["breakdown"]["median_step_ms"] == 144.0


def test_output_is_deterministic(diagnosis_factory: Callable[..., Diagnosis]) -> None:
    assert render(diagnosis_factory(), "json") == render(diagnosis_factory(), "json")


def test_non_finite_numbers_become_null_and_float_noise_is_rounded(
    diagnosis_factory: Callable[..., Diagnosis], stall: Finding
) -> None:
    odd = replace(stall, evidence={"wait_ms": float("nan"), "step_ms": [0.1 + 0.2, float("inf")]})
    text = render(diagnosis_factory(findings=(odd,)), "json")
    assert json.loads(text)["findings"][0]["evidence"] == {"wait_ms": None, "step_ms": [0.3, None]}
    assert "NaN" not in text and "Infinity" not in text


def test_skipped_and_notes(diagnosis: Diagnosis) -> None:
    doc = json.loads(render(diagnosis, "json"))
    assert doc["skipped"][0]["rule"] == "gpu-idle"
    assert doc["skipped"][0]["enable"].startswith("record on a GPU")
    assert doc["notes"] == ["memory events present; reserved memory read from [memory] events"]
