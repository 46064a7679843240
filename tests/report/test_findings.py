"""Findings wording: one entry per rule across ranks, and a one-sentence verdict."""

from __future__ import annotations

from dataclasses import replace

from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Finding
from torchpace.report import findings, render


def test_rank_ranges() -> None:
    assert findings.rank_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert findings.rank_ranges([3]) == "3"
    assert findings.rank_ranges([]) == ""


def test_one_rule_on_several_ranks_is_shown_once(multirank: Diagnosis, stall: Finding) -> None:
    on_ranks = (
        replace(stall, rank=1, saving_ms=42.0),
        replace(stall, rank=0, saving_ms=30.0),
        replace(stall, rank=3, saving_ms=35.5),
        replace(stall, rank=2, saving_ms=None),
    )
    d = replace(multirank, findings=on_ranks)
    (view,) = findings.views(d)
    assert view.title == "dataloader-stall (rank 1)"
    assert view.also == "Also on ranks 0, 2-3 (estimated saving 30.0 ms to 35.5 ms per step)"
    text = render(d, "text", width=200)
    assert "Findings (1; 4 across ranks), largest estimated saving first" in text
    assert "   Also on ranks 0, 2-3 (estimated saving 30.0 ms to 35.5 ms per step)" in text
    assert text.count("] dataloader-stall") == 1
    assert "Also on ranks 0, 2-3" in render(d, "md")
    assert len(render(d, "json").split('"rule": "dataloader-stall"')) == 5  # JSON keeps all four


def test_verdict_counts_severities_and_names_the_largest_saving(diagnosis: Diagnosis) -> None:
    assert findings.verdict(diagnosis) == (
        "3 findings (1 high, 1 medium, 1 low). Largest estimated saving: dataloader-stall, "
        "about 42.0 ms per step (35% of the step)."
    )
    assert "Verdict: 3 findings (1 high, 1 medium, 1 low)." in render(diagnosis, "text")


def test_verdict_without_findings(window_diagnosis: Diagnosis) -> None:
    assert findings.verdict(window_diagnosis) == (
        "No findings: no rule found anything that slows these steps."
    )


def test_verdict_counts_a_finding_on_several_ranks_once(multirank: Diagnosis) -> None:
    (stall,) = multirank.findings
    both = replace(multirank, findings=(stall, replace(stall, rank=0, saving_ms=1.0)))
    said = findings.verdict(both)
    assert said.startswith("1 finding (1 high; 2 across ranks).")
