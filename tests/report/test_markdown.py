"""The Markdown report: GitHub tables and fenced fix code, fit to post as a CI comment."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Finding
from torchpace.report import render


def test_header_table_and_verdict(diagnosis: Diagnosis) -> None:
    md = render(diagnosis, "md")
    assert md.startswith(
        "## torchpace report: `traces/resnet50.pt.trace.json.gz`\n\n**3 findings (1 high, 1 medium, 1 low). Largest estimated saving: "
        "dataloader-stall, about 42.0 ms per step (35% of the step).**\n"
    )
    assert "| Trace | `traces/resnet50.pt.trace.json.gz` |" in md
    assert "| Median step | 121 ms |" in md
    assert "> **Note:** memory events present" in md


def test_breakdown_and_steps_are_tables(diagnosis: Diagnosis) -> None:
    md = render(diagnosis, "md")
    assert "| phase | time | share |\n|---|---:|---:|\n| data loading | 60.6 ms | 50% |" in md
    assert "| 4 | 372 | 186 | 6.20 | 46.5 | 93.0 | 15.5 | 24.8 | 30% | 3.1x the median |" in md


def test_findings_have_evidence_saving_and_fenced_fix(diagnosis: Diagnosis) -> None:
    md = render(diagnosis, "md")
    assert "#### 1. `dataloader-stall` - HIGH\n\nEach step waits 50% of its time" in md
    assert "| `wait_fraction` | 50% |" in md
    assert (
        "**Estimated saving:** about 42.0 ms per step (35% of the 121 ms median step on Tesla" in md
    )
    assert (
        "```python\nDataLoader(dataset, num_workers=4, pin_memory=True, persistent_workers=True)\n```"
        in md
    )
    assert "**Where:** `train.py:42 in main (6x)`" in md
    assert (
        "- `gpu-idle`: the trace has no kernels (CPU-only run). To enable: `record on a GPU" in md
    )


def test_pipes_and_backticks_cannot_break_the_layout(
    diagnosis_factory: Callable[..., Diagnosis], stall: Finding
) -> None:
    odd = replace(
        stall,
        evidence={"op": "a|b"},
        fix="# a fence inside the fix\n```\nx = 1\n```",
    )
    md = render(diagnosis_factory(findings=(odd,)), "md")
    assert "| `op` | a\\|b |" in md
    assert "````python\n# a fence inside the fix\n```\nx = 1\n```\n````" in md


def test_ranks_table_names_the_slowest(multirank: Diagnosis) -> None:
    md = render(multirank, "md")
    assert "| 1 | 144 | 72.0 | 2.40 | 0 | 18.0 | 36.0 | 6.00 | 9.60 | 30% | slowest |" in md
    assert "**Slowest rank: 1, median step 144 ms, 20% above the fastest (rank 0, 120 ms).**" in md


def test_no_findings(window_diagnosis: Diagnosis) -> None:
    md = render(window_diagnosis, "md")
    assert "No findings: no rule found anything that slows these steps." in md
    assert "Per step" not in md
