"""A followed run's account in HTML: the timeline picture and its tables (hand-made accounts:
these check the drawing, not what a run measures)."""

from __future__ import annotations

import json
import re

from torchpace.report import run_figure
from torchpace.runner.sensors.whole_run import (
    PHASES,
    AccountPhase,
    Projection,
    RunAccount,
    SlowStep,
    Timeline,
)


def synthetic_account(**extra: object) -> RunAccount:
    """10 s: 1 s start-up, training with an evaluation pass at 6 s, 0.5 s tear-down."""
    bins = []
    for i in range(20):  # 0.5 s bins
        row = dict.fromkeys(PHASES, 0.0)
        phase = (
            "start-up"
            if i < 2
            else "evaluation"
            if i == 12
            else "tear-down"
            if i == 19
            else "training"
        )
        row[phase] = 0.5
        bins.append(tuple(row[p] for p in PHASES))
    seconds = {p: sum(b[k] for b in bins) for k, p in enumerate(PHASES)}
    return RunAccount(
        wall_s=10.0,
        phases=tuple(AccountPhase(p, seconds[p]) for p in PHASES),
        steps=100,
        epochs=2,
        timeline=Timeline(0.5, tuple(bins)),
        slow_steps=(
            SlowStep(
                60, 6.5, 520.0, 20.0, "an evaluation pass", "inside the step: evaluation 500 ms"
            ),
            SlowStep(
                61, 6.52, 90.0, 20.0, "Python between torch ops <logging>", trace="/tmp/x.json"
            ),
        ),
        slow_seen=2,
        **extra,  # type: ignore[arg-type]
    )


def test_the_timeline_marks_each_slow_step_and_names_each_phase() -> None:
    svg = run_figure.run_svg(synthetic_account())
    assert svg is not None and svg.startswith("<svg")
    assert svg.count("<title>#") == 2  # one marker per slow step, its step on hover
    assert ">#1<" in svg and ">#2<" in svg  # numbered as in the table
    for words in ("start-up", "training", "evaluation", "tear-down"):
        assert f">{words}<" in svg, words  # the legend: words beside the hatched swatches
    assert "checkpoint" not in re.sub(r"<defs>.*</defs>", "", svg)  # no time, no legend entry
    assert "&lt;logging&gt;" in svg and "<logging>" not in svg  # escaped


def test_the_section_has_the_account_the_slow_steps_and_the_projection() -> None:
    projected = Projection(4.0, 10, 41.5, "start-up + 10 epochs x 4.0 s + tear-down")
    html = run_figure.section(
        synthetic_account(projection=projected, ended="stopped after epoch 2 (--epochs)")
    )
    assert html.startswith("<section id='account'>") and "<svg" in html
    assert "<td>#1</td><td>60</td>" in html and "26.0x" in html
    assert "Projected whole job: 41.5 s for 10 epochs" in html
    assert run_figure.section(None) == ""


def test_no_timeline_no_picture() -> None:
    assert run_figure.run_svg(RunAccount(1.0, (), 0, 0)) is None


def test_every_format_shows_the_slow_steps_and_the_projection() -> None:
    from dataclasses import replace
    from pathlib import Path

    from torchpace.doctor.diagnose import diagnose
    from torchpace.report.jsondoc import render_json
    from torchpace.report.markdown import render_markdown
    from torchpace.report.text import render_text
    from torchpace.trace import load_trace

    root = Path(__file__).resolve().parents[2]
    trace = load_trace(root / "tests/fixtures/traces/compare_pairs/cheap_1_worker.json.gz")
    projected = Projection(4.0, 10, 41.5, "start-up + 10 epochs x 4.0 s + tear-down")
    d = replace(diagnose(trace), account=synthetic_account(projection=projected))
    for text in (render_text(d), render_markdown(d)):
        assert "Slow steps: 2 over 3x the running and the recent median" in text
        assert "an evaluation pass" in text and "Projected whole job: 41.5 s" in text
    doc = json.loads(render_json(d))["run_account"]
    assert [s["step"] for s in doc["slow_steps"]] == [60, 61]
    assert doc["slow_steps"][0]["step_ms"] == 520.0 and doc["projection"]["wall_s"] == 41.5
