"""`torchpace.analyze(path)` from Python: the same diagnosis as `torchpace analyze`, with its
arguments checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import torchpace
from torchpace.cli.main import main
from torchpace.errors import TraceError, UsageError
from torchpace.report.jsondoc import render_json

TRACES = Path(__file__).parents[1] / "fixtures" / "traces"
SLEEPY = TRACES / "loader_workers" / "cpu_sleepy_loader.json.gz"
RANKS = TRACES / "ddp_gloo_2rank" / "straggler_data"


@pytest.mark.parametrize("path", [SLEEPY, RANKS], ids=["one file", "a folder of ranks"])
def test_the_command_reports_what_the_function_returns(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    diagnosis = torchpace.analyze(str(path), jobs=1)
    assert main(["analyze", str(path), "--format", "json", "-j", "1"]) == 0
    assert capsys.readouterr().out == render_json(diagnosis)


def test_rule_filters_and_thresholds() -> None:
    found = torchpace.analyze(SLEEPY, jobs=1)
    assert "dataloader-stall" in {f.rule for f in found.findings}
    ignored = torchpace.analyze(SLEEPY, ignore=["dataloader-stall"], jobs=1)
    assert "dataloader-stall" not in {f.rule for f in ignored.findings}
    only = torchpace.analyze(SLEEPY, only=["dataloader-stall"], jobs=1)
    assert {f.rule for f in only.findings} == {"dataloader-stall"}
    strict = {"dataloader-stall": {"min_wait_fraction": 0.99}}
    assert not torchpace.analyze(SLEEPY, only=["dataloader-stall"], thresholds=strict).findings


def test_progress_is_told_what_happens() -> None:
    said: list[str] = []
    torchpace.analyze(SLEEPY, jobs=1, progress=said.append)
    assert said == [f"reading {SLEEPY}", f"analysing {SLEEPY}"]


def test_bad_arguments_are_said_plainly(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file or directory"):
        torchpace.analyze(tmp_path / "missing.json")
    with pytest.raises(UsageError, match="jobs=-1: give a number of processes"):
        torchpace.analyze(SLEEPY, jobs=-1)
    with pytest.raises(ValueError, match="unknown rule 'no-such-rule'"):
        torchpace.analyze(SLEEPY, only=["no-such-rule"])


def test_thresholds_are_checked_as_the_config_file_checks_them() -> None:
    # The Python API once checked only a threshold's name: a fraction of 2 (or a threshold of a
    # rule that does not exist) ran, and said nothing.
    out_of_range = {"dataloader-stall": {"min_wait_fraction": 2}}
    with pytest.raises(
        ValueError,
        match=r"^rule 'dataloader-stall' threshold min_wait_fraction = 2; give a number from 0 "
        r"to 1 \(default 0.1\)$",
    ):
        torchpace.analyze(SLEEPY, thresholds=out_of_range)
    with pytest.raises(UsageError, match=r"^unknown rule 'gpu-idel'; run 'torchpace rules' to "):
        torchpace.analyze(SLEEPY, thresholds={"gpu-idel": {"min_idle_fraction": 0.5}})


def test_a_rule_of_the_live_script_does_not_run_on_a_trace() -> None:
    # (the command line refuses `--only channels-last`; settings may select it for the doctor)
    found = torchpace.analyze(SLEEPY, only=["channels-last"], jobs=1)
    assert not found.findings and not found.skipped


def test_importing_torchpace_loads_no_engine() -> None:
    # The name is resolved on first use: `import torchpace` stays light.
    code = (
        "import sys, torchpace; print(sorted(m for m in sys.modules if m.startswith('torchpace')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['torchpace']"
