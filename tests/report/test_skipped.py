"""'Not analysed' makes sense: one line per cause, advice only where the user can act on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchpace.doctor.diagnose import diagnose
from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Skipped
from torchpace.doctor.recording import Recording
from torchpace.doctor.skips import doctor_advice
from torchpace.report import render
from torchpace.report.skipped import groups
from torchpace.trace import load_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


CPU_RUN = TRACES / "loader_workers" / "cpu_sleepy_loader.json.gz"


@pytest.fixture(scope="module")
def cpu_run() -> Diagnosis:
    """A real CPU-only trace: every rule that judges GPU work is skipped, each in its own words."""
    return diagnose(load_trace(CPU_RUN))


@pytest.fixture(scope="module")
def doctored() -> Diagnosis:
    """The same trace as the doctor's own recording of `train.py --epochs 1`."""
    return diagnose(load_trace(CPU_RUN), recording=Recording("train.py --epochs 1"))


def _section(text: str) -> list[str]:
    section = text[text.index("Not analysed") :]
    return section.split("\n\n", 1)[0].splitlines()  # up to the next section


def test_a_cpu_trace_skips_many_rules_for_one_cause(cpu_run: Diagnosis) -> None:
    assert len(cpu_run.skipped) >= 8  # the rules' own reasons differ in wording
    (group,) = groups(cpu_run)
    assert set(group.rules) == {s.rule for s in cpu_run.skipped}
    assert "ProfilerActivity.CUDA" in group.enable  # a trace the user recorded: they can add it


def test_text_groups_them_in_a_couple_of_lines(cpu_run: Diagnosis) -> None:
    head, *body = _section(render(cpu_run, "text", width=100))
    assert head == f"Not analysed ({len(cpu_run.skipped)} rules; --verbose lists each)"
    assert 1 <= len(body) <= 2
    assert body[0].startswith(f"  {len(cpu_run.skipped)} rules: they judge GPU work")


def test_verbose_and_json_list_every_rule(cpu_run: Diagnosis) -> None:
    verbose = "\n".join(_section(render(cpu_run, "text", verbose=True)))
    doc = json.loads(render(cpu_run, "json"))
    for skipped in cpu_run.skipped:
        assert f"  {skipped.rule}: {skipped.reason}" in verbose.replace("\n    ", " ")
        assert {"rule": skipped.rule, "reason": skipped.reason, "enable": skipped.enable} in doc[
            "skipped"
        ]


def test_under_the_doctor_no_profiler_option_is_suggested(
    cpu_run: Diagnosis, doctored: Diagnosis
) -> None:
    for fmt in ("text", "md", "html", "json"):
        out = render(doctored, fmt)
        assert "ProfilerActivity" not in out and "torch.profiler.profile(" not in out, fmt
    head, *body = _section(render(doctored, "text"))
    assert "the JSON report lists each" in head  # the doctor has no --verbose of its own here
    assert body == [f"  {len(cpu_run.skipped)} rules: they judge GPU work, and this run did none"]


def test_the_doctor_says_what_its_own_options_change() -> None:
    memory = Skipped(
        "memory-pressure", "the trace has no GPU memory events", "profile(profile_memory=True)"
    )
    shapes = Skipped("tensor-core-unfriendly-shape", "no shapes", "profile(record_shapes=True)")
    watch = Skipped("grad-in-eval", "no step was watched (...)", "run with --warmup 1 or more")
    assert doctor_advice(memory).enable == "run the doctor without --no-memory"
    assert doctor_advice(shapes).enable == ""  # the doctor always records shapes
    assert doctor_advice(watch) is watch  # a doctor option: the advice stands


def test_causes_that_differ_stay_apart(diagnosis_factory) -> None:  # type: ignore[no-untyped-def]
    watched = [
        Skipped("grad-in-eval", "no step was watched (torch.compile ...)", "run with --warmup 1"),
        Skipped(
            "double-precision", "no model was watched (torch.compile ...)", "run with --warmup 1"
        ),
    ]
    other = Skipped("rank-imbalance", "one rank's trace", "analyze the folder")
    found = groups(diagnosis_factory(skipped=(*watched, other)))
    assert [g.rules for g in found] == [("double-precision", "grad-in-eval"), ("rank-imbalance",)]
    text = render(diagnosis_factory(skipped=(*watched, other)), "text")
    assert "  double-precision, grad-in-eval: the doctor watched no step" in text
    assert "lists each" not in text  # every rule is named already


def test_title_is_the_script_under_the_doctor_and_the_trace_otherwise(
    cpu_run: Diagnosis, doctored: Diagnosis
) -> None:
    assert render(cpu_run, "text").startswith(f"torchpace report: {cpu_run.info.path}\n")
    assert render(doctored, "text").startswith("torchpace report: train.py --epochs 1\n")
    assert render(doctored, "md").startswith("## torchpace report: `train.py --epochs 1`\n")
    assert "<title>torchpace report: train.py --epochs 1</title>" in render(doctored, "html")
