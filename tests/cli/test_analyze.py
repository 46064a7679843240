"""`torchpace analyze`: formats, output files, exit codes, rule filters, colour and progress."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from torchpace.cli.reporting import exit_code
from torchpace.doctor.diagnosis import Diagnosis
from torchpace.doctor.finding import Finding, Severity
from torchpace.doctor.registry import all_rules
from torchpace.trace.summary import Breakdown, TraceInfo

Cli = Callable[..., Any]  # conftest's cli fixture: (code, out, err) of one run
Trace = Callable[[str], Path]
STALL = "loader_workers/resnet50_v100_num_workers_0.json.gz"
HEALTHY = "healthy/cpu_fast_loader.json.gz"
MEMORY = "cupti_alloc_benchmark/benchmark_cupti_alloc.json.gz"
NCCL = "nccl/nccl_a100.json.gz"
ANSI = re.compile(r"\x1b\[")


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_text_report_to_stdout(cli: Cli, trace: Trace) -> None:
    result = cli("analyze", trace(STALL))
    assert result.code == 0
    # The title is the trace, as given on the command line.
    assert result.out.startswith(f"torchpace report: {trace(STALL)}\n")
    assert "resnet50_v100_num_workers_0.json.gz" in result.out
    assert "Tesla V100-DGXS-32GB" in result.out
    assert "Median step" in result.out
    assert not ANSI.search(result.out)
    assert result.err == ""  # no progress when stderr is not a terminal


def test_json_to_stdout(cli: Cli, trace: Trace) -> None:
    result = cli("analyze", trace(STALL), "--format", "json")
    doc = json.loads(result.out)
    assert doc["schema_version"] == 2
    assert doc["header"]["device_name"] == "Tesla V100-DGXS-32GB"
    assert doc["header"]["step_count"] == 6


@pytest.mark.parametrize(
    ("name", "starts"),
    [
        ("r.md", "## torchpace report"),
        ("r.json", "{"),
        ("r.txt", "torchpace report"),
        ("r.html", "<!DOCTYPE html>"),
    ],
)
def test_output_file_format_from_extension(
    cli: Cli, trace: Trace, tmp_path: Path, name: str, starts: str
) -> None:
    out = tmp_path / name
    result = cli("analyze", trace(STALL), "-o", out)
    assert result.code == 0
    assert result.out == ""
    assert result.err == f"torchpace: report written to {out}\n"
    assert out.read_text().startswith(starts)


def test_fail_on_gates_ci(cli: Cli, trace: Trace) -> None:
    result = cli("analyze", trace(STALL), "--format", "json", "--fail-on", "low")
    findings = json.loads(result.out)["findings"]
    assert findings, "the V100 ResNet-50 trace must give findings"
    assert result.code == 1
    assert re.fullmatch(
        r"torchpace: \d+ findings? at or above --fail-on low: [a-z-, ]+\n", result.err
    )


def test_exit_code_compares_severity_at_or_above() -> None:
    def diagnosis(*severities: Severity) -> Diagnosis:
        found = tuple(Finding(f"rule-{s.label}", s, "s", {}, "fix") for s in severities)
        return Diagnosis(TraceInfo("t.json", "cpu"), Breakdown((), 1.0, {}), found)

    assert exit_code(diagnosis(Severity.MEDIUM), None) == 0
    assert exit_code(diagnosis(Severity.MEDIUM), Severity.MEDIUM) == 1
    assert exit_code(diagnosis(Severity.LOW, Severity.MEDIUM), Severity.HIGH) == 0
    assert exit_code(diagnosis(), Severity.LOW) == 0


def test_only_and_ignore_take_repeated_or_comma_separated_ids(cli: Cli, trace: Trace) -> None:
    every = {
        f["rule"]
        for f in json.loads(cli("analyze", trace(STALL), "--format", "json").out)["findings"]
    }
    assert "dataloader-stall" in every
    only = cli("analyze", trace(STALL), "--format", "json", "--only", "dataloader-stall,sync-point")
    assert {f["rule"] for f in json.loads(only.out)["findings"]} <= {
        "dataloader-stall",
        "sync-point",
    }
    ignored = cli(
        "analyze",
        trace(STALL),
        "--format",
        "json",
        "--ignore",
        "dataloader-stall",
        "--ignore",
        "gpu-idle",
    )
    assert {f["rule"] for f in json.loads(ignored.out)["findings"]} == every - {
        "dataloader-stall",
        "gpu-idle",
    }


def test_unknown_rule_id(cli: Cli, trace: Trace) -> None:
    result = cli("analyze", trace(STALL), "--only", "no-such-rule")
    assert result.code == 2
    assert (
        result.err
        == "torchpace: error: unknown rule 'no-such-rule'; run 'torchpace rules' to list them\n"
    )
    near = cli("analyze", trace(STALL), "--ignore", "dataloader-stal")
    assert near.err.endswith("to list them (did you mean 'dataloader-stall'?)\n")


def test_unknown_fail_on(cli: Cli, trace: Trace) -> None:
    result = cli("analyze", trace(STALL), "--fail-on", "urgent")
    assert result.code == 2
    assert (
        result.err
        == "torchpace: error: unknown --fail-on 'urgent'; choose one of: low, medium, high\n"
    )


def test_unwritable_output(cli: Cli, trace: Trace, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "r.json"
    result = cli("analyze", trace(STALL), "-o", target)
    assert result.code == 2
    assert result.err == (
        f"torchpace: error: cannot write the report to '{target}': No such file or directory; "
        "choose a path in a writable folder\n"
    )


def test_colour_on_a_terminal_unless_no_color(
    cli: Cli, trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    for no_color, coloured in (("", True), ("1", False)):
        monkeypatch.setenv("NO_COLOR", no_color)
        screen = Terminal()
        monkeypatch.setattr(sys, "stdout", screen)
        assert cli("analyze", trace(STALL)).code == 0
        assert bool(ANSI.search(screen.getvalue())) is coloured
        assert "Tesla V100-DGXS-32GB" in screen.getvalue()


def test_progress_only_on_a_terminal_and_erased(
    cli: Cli, trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "xterm")
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    assert cli("analyze", trace(STALL), "--format", "json").code == 0
    shown = screen.getvalue()
    assert "torchpace: reading " in shown and "torchpace: analysing " in shown
    assert shown.endswith("\r\x1b[K")


def test_directory_of_rank_traces(cli: Cli, trace: Trace, tmp_path: Path) -> None:
    for rank in (0, 1):
        shutil.copy(trace(HEALTHY), tmp_path / f"rank{rank}.json.gz")
    result = cli("analyze", tmp_path)
    assert result.code == 0
    assert "Ranks (2), median ms per step" in result.out
    assert "Slowest rank: " in result.out


def test_a_crashing_rule_does_not_lose_the_report(
    cli: Cli, trace: Trace, crashing_rule: str
) -> None:
    result = cli("analyze", trace(STALL), "--format", "json")
    assert result.code == 0
    doc = json.loads(result.out)
    assert any(f["rule"] == "dataloader-stall" for f in doc["findings"])
    (failed,) = [s for s in doc["skipped"] if s["rule"] == crashing_rule]
    assert failed["reason"].startswith("rule failed (RuntimeError: boom)")
    text = cli("analyze", trace(STALL)).out
    assert "crashing-rule: rule failed (RuntimeError: boom)" in text


def test_help_has_examples(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli("analyze", "--help")
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "--fail-on high" in text and "exit status: 0 analysed" in text


def test_analyze_rules_and_explain_do_not_import_torch_rich_or_numpy(trace: Trace) -> None:
    # numpy alone would cost a sixth of analyzing a 54 MB trace (~70 ms of imports).
    code = (
        "import sys\n"
        "from torchpace.cli.main import main\n"
        f"code = main(['analyze', {str(trace(STALL))!r}])\n"
        f"code += main(['analyze', {str(trace(MEMORY))!r}, '--format', 'json'])\n"
        f"code += main(['analyze', {str(trace(NCCL))!r}, '--format', 'md'])\n"
        "code += main(['rules']) + main(['explain', 'sync-point'])\n"
        "heavy = ('torch', 'rich', 'matplotlib', 'numpy')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "print(code, bad, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip() == "0 []"


def test_an_internal_error_is_one_line_unless_debugging(
    cli: Cli, trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(part: object, path: str) -> object:
        raise KeyError("ts")

    monkeypatch.setattr("torchpace.trace.load.build_trace", broken)
    path = trace(HEALTHY)
    result = cli("analyze", path)
    assert result.code == 2
    assert result.err == (
        f"torchpace: error: {path}: analysis failed (KeyError: 'ts'); this is a torchpace bug, "
        "please report it with the trace (TORCHPACE_DEBUG=1 prints the traceback)\n"
    )
    monkeypatch.setenv("TORCHPACE_DEBUG", "1")
    with pytest.raises(KeyError):
        cli("analyze", path)


def test_running_out_of_memory_is_one_line_not_a_bug(
    cli: Cli, trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def too_large(part: object, path: str) -> object:
        raise MemoryError

    monkeypatch.setattr("torchpace.trace.load.build_trace", too_large)
    path = trace(HEALTHY)
    result = cli("analyze", path)
    assert result.code == 2
    assert result.err == (
        f"torchpace: error: {path}: not enough memory to analyse it (decoding needs about 3x the "
        "JSON); free memory, or analyse one rank's file at a time\n"
    )


def test_output_never_overwrites_the_trace(cli: Cli, trace: Trace, tmp_path: Path) -> None:
    copy = tmp_path / "t.json"
    with gzip.open(trace(HEALTHY)) as src:
        copy.write_bytes(src.read())
    before = copy.read_bytes()
    result = cli("analyze", copy, "-o", copy)
    assert result.code == 2
    assert result.err == (
        f"torchpace: error: -o '{copy}' is the trace being analysed; writing the report there "
        "would destroy it: choose another file\n"
    )
    assert copy.read_bytes() == before


def test_only_a_live_rule_says_to_use_doctor(cli: Cli, trace: Trace) -> None:
    live = all_rules("live")
    assert live, "the doctor's live rules are registered"
    name = live[0].name
    result = cli("analyze", trace(HEALTHY), "--only", name)
    assert result.code == 2
    assert result.err == (
        f"torchpace: error: rule '{name}' inspects the live script (DataLoaders, model, flags), "
        f"which a trace does not record; run it with 'torchpace doctor --only {name} SCRIPT'\n"
    )
