"""JSON lines, terminal table and HTML page from one result."""

from __future__ import annotations

import json
import re
from pathlib import Path

from torchpace.bench.results import BenchResult, read_jsonl, to_jsonl
from torchpace.report.bench.html import render_html
from torchpace.report.bench.text import render_plain, render_rich


def test_json_lines_carry_the_full_environment_on_every_line(vision_result: BenchResult) -> None:
    lines = to_jsonl(vision_result).splitlines()
    assert len(lines) == len(vision_result.configs) + len(vision_result.skipped)
    for line in lines:
        record = json.loads(line)
        assert record["schema_version"] == 2
        env = record["environment"]
        assert env["device"] == "cpu" and env["torch"] and env["cores"] >= 1 and "cuda" in env
        assert record["type"] in ("config", "skipped")
    first = json.loads(lines[0])["config"]
    assert {
        "units_per_s",
        "speedup",
        "step_ms_median",
        "data_wait_fraction",
        "peak_memory_bytes",
        "first_step_ms",
        "parity",
        "speedup_low",
        "speedup_high",
        "verdict",
        "flags",
    } <= set(first)
    assert json.loads(lines[0])["load"]["cores"] >= 1


def test_json_lines_read_back_equal(vision_result: BenchResult, tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(to_jsonl(vision_result))
    assert read_jsonl(path) == vision_result


def test_plain_table_shows_baseline_environment_and_skip_reasons(
    vision_result: BenchResult,
) -> None:
    text = render_plain(vision_result)
    assert "\x1b[" not in text
    assert re.search(r"baseline: naive loop .* = [\d,.]+ samples/s; speedup = baseline time", text)
    assert "speedup [95% interval]; ~ no measurable change" in text
    assert "machine load: " in text and "note: intervals: 95%" in text
    assert (
        "environment: cpu (" in text and "torch " in text and "no CUDA" in text and "cores" in text
    )
    assert "skipped pin-memory: only helps with an accelerator" in text
    assert "skipped tf32: needs an Ampere+ CUDA GPU" in text
    assert "input pipeline: the full recipe reaches" in text
    assert "-- each technique on its own" in text and "-- cumulative" in text


def test_rich_table_is_for_terminals(text_result: BenchResult) -> None:
    text = render_rich(text_result)
    assert "\x1b[" in text and "tokens/s" in text and "bucketing" in text
    assert "skipped channels-last: the text workload has no convolutions" in text


def test_html_is_self_contained_with_both_charts(vision_result: BenchResult) -> None:
    page = render_html(vision_result)
    assert page.count("<svg") == 2
    assert "speedup over the naive baseline" in page and "step time (ms, log scale)" in page
    assert not re.search(
        r"<(script|link|img)\b", page
    )  # nothing fetched: no scripts, links or images
    assert "only helps with an accelerator" in page
