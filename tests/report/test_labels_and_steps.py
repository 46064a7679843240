"""Every format shows the user's own labels and says how steps were found and which are warm-up."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.diagnosis import Diagnosis
from torchpace.report import render
from torchpace.trace import load_trace

FIXTURES = Path(__file__).parents[1] / "fixtures"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def labelled() -> Diagnosis:
    return diagnose(load_trace(FIXTURES / "traces/user_labels/cpu_transformer_labels.json.gz"))


@pytest.fixture(scope="module")
def r50() -> Diagnosis:
    path = FIXTURES / "corpus/kineto_v100_resnet50_autograd_nw4.pt.trace.json.gz"
    return diagnose(load_trace(path))


def test_text_shows_the_label_tree(labelled: Diagnosis) -> None:
    text = render(labelled, "text")
    assert "Your labels (record_function ranges), median per step over 4 steps" in text
    assert re.search(r"\n  forward_pass +1 +\d", text)
    assert re.search(r"\n    transformer_layer:self_attention +2 +\d", text)  # indented: nested


def test_every_format_names_the_users_labels(labelled: Diagnosis) -> None:
    rich = ANSI.sub("", render(labelled, "text", color=True, width=140))
    markdown = render(labelled, "md")
    page = render(labelled, "html")
    for output in (rich, markdown, page):
        assert "transformer_layer:self_attention" in output and "forward_pass" in output
    assert "| &nbsp;&nbsp;↳ `transformer_layer:feed_forward` | 2 |" in markdown
    assert "<section id='labels'>" in page and "padding-left:1.6em" in page
    doc = json.loads(render(labelled, "json"))["user_labels"]
    assert doc["steps_count"] == 4 and doc["device_time_method"] is None
    row = next(r for r in doc["labels"] if r["name"] == "transformer_layer:self_attention")
    assert row["path"] == ["forward_pass", "transformer_layer:self_attention"]
    assert row["calls_per_step_count"] == 2 and row["host_ms"] > 0 and row["device_ms"] is None


def test_header_says_how_steps_were_found_and_which_is_warm_up(r50: Diagnosis) -> None:
    header = json.loads(render(r50, "json"))["header"]
    assert header["step_source"] == "dataloader"
    assert (header["step_count"], header["warmup_step_count"]) == (6, 1)
    sentence = header["step_detection"]
    assert sentence.startswith("6 iterations inferred from the repeating enumerate(DataLoader)")
    assert "step 0 is warm-up" in sentence and "cuDNN autotuning" in sentence
    steps = json.loads(render(r50, "json"))["breakdown"]["steps"]
    assert steps[0]["warmup"].startswith("warm-up: ") and not any(s["warmup"] for s in steps[1:])
    for fmt in ("text", "md", "html"):
        assert "inferred from the repeating" in render(r50, fmt), fmt
    assert "step 0 is warm-up" in render(r50, "text", width=400)
