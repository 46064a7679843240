"""torchpace compare on recorded before/after pairs: verdicts, phases, kernels, findings."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from torchpace.compare import Comparison, compare, compare_paths, load_side
from torchpace.doctor.diagnose import diagnose
from torchpace.errors import TraceError
from torchpace.report.compare import renderer
from torchpace.report.jsondoc import render_json
from torchpace.trace import load_traces

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
R50_NW0 = TRACES / "loader_workers" / "resnet50_v100_num_workers_0.json.gz"
R50_NW4 = TRACES / "loader_workers" / "resnet50_v100_num_workers_4.json.gz"
SLEEPY = TRACES / "loader_workers" / "cpu_sleepy_loader.json.gz"
SLEEPY_4 = TRACES / "loader_workers" / "cpu_sleepy_loader_4_workers.json.gz"
PAIRS = TRACES / "compare_pairs"


@cache
def _compare(before: Path, after: Path) -> Comparison:
    return compare_paths(str(before), str(after))


def _phase(c: Comparison, name: str):  # type: ignore[no-untyped-def]
    return next(p.change for p in c.phases if p.name == name)


def test_gpu_pair_workers_fix_the_stall() -> None:
    """The V100 ResNet-50 of kineto's samples, 0 then 4 workers (two real runs a day apart)."""
    c = _compare(R50_NW0, R50_NW4)
    assert c.verdict == "faster" and 1.2 < c.step.speedup < 1.6
    loader = _phase(c, "dataloader")
    assert loader.verdict == "faster" and -75 < loader.delta_ms < -60
    resolved = {f.rule for f in c.findings.resolved}
    assert {"dataloader-stall", "gpu-idle"} <= resolved
    assert c.kernels is not None and len(c.kernels) == 10
    deltas = [abs(k.change.delta_ms) for k in c.kernels]
    assert deltas == sorted(deltas, reverse=True)


def test_dataloader_stall_estimate_agrees_with_the_measured_phase() -> None:
    """Calibration on a real GPU pair (docs/rules-calibration.md): the loading time removed."""
    c = _compare(R50_NW0, R50_NW4)
    (stall,) = [f for f in c.findings.resolved if f.rule == "dataloader-stall"]
    removed = -_phase(c, "dataloader").delta_ms
    assert stall.saving_ms is not None
    assert abs(stall.saving_ms - removed) / removed < 0.25


def test_cpu_pair_sleepy_loader_fixed_by_workers() -> None:
    c = _compare(SLEEPY, SLEEPY_4)
    assert c.verdict == "faster" and c.step.speedup > 3
    assert c.kernels is None and c.ops is not None
    assert _phase(c, "forward").verdict == "no-change"
    assert "not interleaved" in c.notes[0]


def test_a_run_against_itself_is_no_measurable_change() -> None:
    side = load_side(str(SLEEPY))
    c = compare(side, side)
    assert c.verdict == "no-change"
    assert all(p.change.verdict == "no-change" for p in c.phases)
    assert not c.findings.resolved and not c.findings.new and not c.findings.changed
    assert [f.rule for f in c.findings.unchanged] == [f.rule for f in side.findings]


def test_folders_of_ranks_compare_by_the_slowest_rank() -> None:
    c = _compare(
        TRACES / "ddp_gloo_2rank" / "straggler_data", TRACES / "ddp_gloo_2rank" / "balanced"
    )
    assert c.before.kind == "ranks" and c.before.ranks == 2
    assert c.verdict == "faster" and _phase(c, "dataloader").verdict == "faster"
    assert "rank-imbalance" in {f.rule for f in c.findings.resolved}


def test_json_reports_compare_like_their_traces(tmp_path: Path) -> None:
    paths = []
    for trace in (SLEEPY, SLEEPY_4):
        path = tmp_path / f"{trace.name}.report.json"
        path.write_text(render_json(diagnose(load_traces(trace))))
        paths.append(path)
    from_reports = _compare(*paths)
    from_traces = _compare(SLEEPY, SLEEPY_4)
    assert from_reports.verdict == from_traces.verdict == "faster"
    assert from_reports.step.point == pytest.approx(from_traces.step.point, rel=1e-3)
    assert from_reports.kernels is None and from_reports.ops is None
    assert any("JSON report holds no kernels" in n for n in from_reports.notes)
    mixed = _compare(SLEEPY, paths[1])  # a trace against a report
    assert mixed.verdict == "faster" and mixed.ops is None


def test_cheap_samples_moved_to_a_worker_on_two_cores_are_slower() -> None:
    """The fix the old worker advice prescribed on a 2-core CPU run, recorded (record.py)."""
    c = _compare(PAIRS / "cheap_0_workers.json.gz", PAIRS / "cheap_1_worker.json.gz")
    assert c.verdict == "slower"


def test_anomaly_detection_switched_off_is_faster_in_backward() -> None:
    c = _compare(PAIRS / "anomaly_on.json.gz", PAIRS / "anomaly_off.json.gz")
    assert _phase(c, "backward").verdict == "faster"


def test_a_whole_step_too_noisy_to_call_is_inconclusive_without_a_ratio() -> None:
    """The anomaly pair's whole step: its interval (0.99-1.35x) is too wide to say "no change"."""
    c = _compare(PAIRS / "anomaly_on.json.gz", PAIRS / "anomaly_off.json.gz")
    assert c.verdict == "inconclusive" and not c.step.settled()
    headline = c.headline()
    assert headline.startswith("inconclusive: step-to-step spread")
    assert "more typical steps a side would settle it" in headline
    assert "x" not in headline.split("(")[0].replace("xt", "")  # no speedup printed
    assert "interval" not in headline
    doc = json.loads(renderer("json")(c))
    assert doc["verdict"] == "inconclusive" and doc["verdict_reason"].startswith("inconclusive")


def test_evaluation_steps_are_set_apart_on_both_sides_and_the_gain_reads_as_one() -> None:
    """Issue 22: 0 -> 4 workers with evaluation inside every 3rd step (record.py, at load 5).
    The evaluation steps' excess is loading (the validation loader), which once kept them
    typical: "no measurable change" [0.56-35.25x]."""
    c = _compare(PAIRS / "eval_0_workers.json.gz", PAIRS / "eval_4_workers.json.gz")
    assert c.verdict == "faster" and c.step.speedup_low > 3
    for side in (c.before, c.after):
        assert [i for i, _ in side.set_apart] == [5, 8, 11]
        assert all(
            "6 batches fetched where a steady step fetches 1" in why for _, why in side.set_apart
        )
        assert len(side.step_ms) == 6  # 9 profiled steps less the 3 evaluations
    assert sum("steps 5, 8, 11 set apart, not typical" in n for n in c.notes) == 2
    doc = json.loads(renderer("json")(c))
    assert [x["step"] for x in doc["before"]["set_apart"]] == [5, 8, 11]


def test_every_format_carries_the_verdict() -> None:
    c = _compare(SLEEPY, SLEEPY_4)
    headline = c.headline()
    assert headline.startswith("AFTER is 5.48x faster")
    for fmt in ("text", "md", "html"):
        assert headline.split(":")[0] in renderer(fmt)(c), fmt
    doc = json.loads(renderer("json")(c))
    assert doc["verdict"] == "faster" and doc["step"]["before_ms"] > doc["step"]["after_ms"]
    assert doc["kernels"] is None and {p["name"] for p in doc["phases"]} >= {"dataloader"}
    assert doc["findings"]["changed"][0]["before"]["rule"] == "dataloader-stall"
    with pytest.raises(ValueError, match="unknown report format"):
        renderer("pdf")


def test_html_escapes_names(tmp_path: Path) -> None:
    from torchpace.trace.synthetic import TraceBuilder

    paths = []
    for n, ms in (("a", 10_000), ("b", 5_000)):
        b = TraceBuilder()
        for i in range(4):
            b.step(i, i * 20_000, ms)
            b.op("<script>alert(1)</script>", i * 20_000, ms // 2)
        paths.append(b.write(tmp_path / f"synthetic_{n}.json"))
    page = renderer("html")(compare_paths(str(paths[0]), str(paths[1])))
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file or folder"):
        load_side(str(tmp_path / "missing.json"))
    odd = tmp_path / "odd.json"
    odd.write_text('{"schema_version": 1, "tool": "torchpace", "header": {}}')
    with pytest.raises(TraceError, match="not a torchpace JSON report this version can read"):
        load_side(str(odd))
