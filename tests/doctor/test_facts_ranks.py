"""Per-rank work and waiting: the one measure the headline, rank-imbalance and reports compare."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import torchpace
from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.facts import rank_works, ranks_of
from torchpace.doctor.facts.ranks import slowest_rank
from torchpace.report import render
from torchpace.trace import load_traces

DLRM = Path(__file__).parents[1] / "fixtures/corpus/param_v100_dlrm_8rank"
SRC = Path(__file__).parents[2] / "src/torchpace"


@pytest.fixture(scope="module")
def dlrm() -> Diagnosis:
    return diagnose(load_traces(DLRM))


def test_dlrm_headline_names_the_rank_that_works_longest(dlrm: Diagnosis) -> None:
    """PARAM DLRM on 8 V100s: ranks 1 and 3 have the longest steps because they wait longest in
    collectives; rank 5 works longest (PROVENANCE.md: work spans 8.8-11.6 ms)."""
    works = {view.info.rank: view.work for view in dlrm.ranks}
    assert all(w is not None for w in works.values())
    work_ms = {r: w.work_ms for r, w in works.items() if w is not None}
    assert 8.0 < min(work_ms.values()) < max(work_ms.values()) < 12.5
    assert dlrm.slowest_rank == max(work_ms, key=lambda r: work_ms[r]) == 5
    steps = {view.info.rank: view.breakdown.median_step_ms for view in dlrm.ranks}
    assert max(steps, key=lambda r: steps[r]) != dlrm.slowest_rank  # steps would name another
    assert any("slowest rank by work" in n for n in dlrm.notes)


def test_dlrm_reports_compare_work_with_work(dlrm: Diagnosis) -> None:
    doc = json.loads(render(dlrm, "json"))
    for entry in doc["ranks"]:
        assert entry["work_ms"] == pytest.approx(
            entry["header"]["median_step_ms"] - entry["collective_wait_ms"], abs=1e-3
        )
    text = render(dlrm, "text", width=200)
    assert "Slowest rank: 5 by work" in text and "more than the least-working rank (rank 1" in text
    assert "above the fastest" not in text  # no step-time ratio beside a rank named by work
    html = render(dlrm, "html")
    assert "rank 5 is the slowest by work" in html and "Waiting in collectives" in html


def test_rank_work_is_measured_once_per_trace(dlrm: Diagnosis) -> None:
    traces = load_traces(DLRM)
    first = rank_works(ranks_of(traces))
    assert rank_works(ranks_of(traces)) == first
    assert slowest_rank(first).rank == 5
    assert [w.rank for w in first] == list(range(8))


def test_the_engine_and_rules_read_rank_facts_not_each_other() -> None:
    """diagnose.py imported rank_imbalance.rank_work: now both read the facts layer (doctor/facts)."""
    for module in ("doctor/diagnose.py", "doctor/rules/rank_imbalance.py", "report/html.py"):
        tree = ast.parse((SRC / module).read_text())
        imported = {
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        }
        assert not any(m.startswith("torchpace.doctor.rules") for m in imported), module
    assert "per_rank" not in (SRC / "report/html.py").read_text()


def test_a_trace_of_no_recorded_rank_is_the_rank_its_file_names(tmp_path: Path) -> None:
    """Files sort by the rank in their names (`rank3`); they were once labelled by position (0,
    1), so the tables, findings and headline named ranks the run never had."""
    traces = Path(__file__).parents[1] / "fixtures/traces"
    for rank, name in ((3, "healthy/cpu_fast_loader"), (5, "loader_workers/cpu_sleepy_loader")):
        (tmp_path / f"rank{rank}.json.gz").write_bytes((traces / f"{name}.json.gz").read_bytes())
    text = render(diagnose(load_traces(tmp_path)), "json")
    for jobs in (1, 2):  # analyze reduces each rank to its summary where it is decoded
        assert render(torchpace.analyze(tmp_path, jobs=jobs), "json") == text
    doc = json.loads(text)
    assert [r["rank"] for r in doc["ranks"]] == [3, 5]
    assert doc["slowest_rank"] in (3, 5)
    assert {f["rank"] for f in doc["findings"]} <= {3, 5, None}
    assert any(f["rank"] == 5 for f in doc["findings"])
