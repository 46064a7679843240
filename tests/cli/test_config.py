"""Settings in [tool.torchpace] (pyproject.toml) and --config FILE: parsed, checked, layered."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from torchpace.cli import config

Cli = Callable[..., Any]  # conftest's cli fixture: (code, out, err) of one run

STALL = (
    Path(__file__).resolve().parents[1] / "fixtures/traces/loader_workers/cpu_sleepy_loader.json.gz"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder, the current directory, with the stalling CPU trace in traces/."""
    (tmp_path / "traces").mkdir()
    shutil.copy(STALL, tmp_path / "traces" / "stall.json.gz")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def rules_json(cli: Cli, *args: str) -> dict[str, dict[str, Any]]:
    result = cli("rules", "--json", *args)
    assert result.code == 0, result.err
    return {r["rule"]: r for r in json.loads(result.out)["rules"]}


def test_a_project_pyproject_sets_rules_thresholds_and_fail_on(cli: Cli, project: Path) -> None:
    trace = "traces/stall.json.gz"
    assert cli("analyze", trace).out.count("[HIGH] dataloader-stall") == 1  # the default finds it
    write(
        project / "pyproject.toml",
        '[project]\nname = "mine"\n\n[tool.torchpace]\nfail-on = "high"\nignore = ["gpu-idle"]\n'
        "[tool.torchpace.thresholds.dataloader-stall]\nmin_wait_fraction = 0.2\n",
    )
    gated = cli("analyze", trace)
    assert gated.code == 1 and "at or above --fail-on high: dataloader-stall" in gated.err
    doc = json.loads(cli("analyze", trace, "--format", "json").out)
    assert "gpu-idle" not in {s["rule"] for s in doc["skipped"]}  # ignored: not even tried
    write(
        project / "pyproject.toml",
        "[tool.torchpace.thresholds.dataloader-stall]\nmin_wait_fraction = 0.95\n",
    )
    assert "dataloader-stall" not in cli("analyze", trace).out  # a 78% wait is under 95%


def test_found_from_a_subfolder_skipping_pyprojects_without_the_table(
    cli: Cli, project: Path
) -> None:
    write(project / "pyproject.toml", '[tool.torchpace]\nignore = ["sync-point"]\n')
    inner = project / "pkg" / "deeper"
    inner.mkdir(parents=True)
    write(project / "pkg" / "pyproject.toml", '[project]\nname = "torchpace-user"\n')
    assert config.find_pyproject(inner) == project / "pyproject.toml"
    assert config.find_pyproject(project.parent) is None


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            '[tool.torchpace]\nfail_on = "high"\n',
            "[tool.torchpace] unknown key 'fail_on'; allowed: only, ignore, fail-on, thresholds, "
            "overrides (did you mean 'fail-on'?)",
        ),
        (
            '[tool.torchpace]\nfail-on = "severe"\n',
            "[tool.torchpace] fail-on = 'severe'; choose one of: low, medium, high",
        ),
        (
            '[tool.torchpace]\nignore = "gpu-idle"\n',
            "ignore = 'gpu-idle'; give a list of strings, e.g. ignore = [\"dataloader-stall\"]",
        ),
        (
            '[tool.torchpace]\nonly = ["gpu-idel"]\n',
            "[tool.torchpace] only: unknown rule 'gpu-idel'; run 'torchpace rules' to list "
            "them (did you mean 'gpu-idle'?)",
        ),
        (
            "[tool.torchpace.thresholds.gpu-idle]\nmin_idle = 0.3\n",
            "thresholds: rule 'gpu-idle' has no threshold 'min_idle'; its thresholds are: "
            "launch_gap_us, min_idle_fraction",
        ),
        (
            "[tool.torchpace.thresholds.gpu-idle]\nmin_idle_fraction = 1.5\n",
            "thresholds: rule 'gpu-idle' threshold min_idle_fraction = 1.5; give a number from 0 "
            "to 1 (default 0.25)",
        ),
        (
            '[tool.torchpace.thresholds.dataloader-stall]\nassumed_workers = "8"\n',
            "assumed_workers = '8'; give a whole number, 0 or more (default 4)",
        ),
        (
            "[tool.torchpace.thresholds.dataloader-stall]\nassumed_workers = 2.5\n",
            "assumed_workers = 2.5; give a whole number, 0 or more (default 4)",
        ),
        ("[[tool.torchpace.overrides]]\nignore = []\n", 'overrides #1 needs paths = ["glob", ...]'),
        ("[tool.torchpace\n", "pyproject.toml is not valid TOML: "),
    ],
    ids=[
        "unknown-key",
        "bad-fail-on",
        "not-a-list",
        "unknown-rule",
        "unknown-threshold",
        "fraction-over-1",
        "string-for-int",
        "float-for-int",
        "override-without-paths",
        "bad-toml",
    ],
)
def test_bad_settings_are_one_line_errors(cli: Cli, project: Path, toml: str, message: str) -> None:
    write(project / "pyproject.toml", toml)
    for args in (("analyze", "traces/stall.json.gz"), ("rules",)):
        result = cli(*args)
        assert result.code == 2, result.err
        (line,) = result.err.strip().splitlines()
        assert line.startswith("torchpace: error: pyproject.toml") and message in line


def test_precedence_cli_over_config_over_pyproject_over_defaults(cli: Cli, project: Path) -> None:
    write(
        project / "pyproject.toml",
        '[tool.torchpace]\nfail-on = "low"\nignore = ["gpu-idle", "sync-point"]\n'
        "[tool.torchpace.thresholds.gpu-idle]\nmin_idle_fraction = 0.3\nlaunch_gap_us = 20.0\n",
    )
    # A --config file may hold the keys at its top level (like ruff.toml).
    write(
        project / "ci.toml",
        'fail-on = "medium"\nignore = ["pageable-copy"]\n'
        "[thresholds.gpu-idle]\nmin_idle_fraction = 0.4\n",
    )
    ci = ("--config", "ci.toml")
    rules = rules_json(cli, *ci)
    assert rules["gpu-idle"]["thresholds"] == {"min_idle_fraction": 0.4, "launch_gap_us": 20.0}
    assert rules["gpu-idle"]["threshold_sources"] == {
        "min_idle_fraction": "--config ci.toml",
        "launch_gap_us": "pyproject.toml",
    }
    assert rules["comm-bound"]["threshold_sources"] == {"min_comm_fraction": "default"}
    off = {name: r["disabled_by"] for name, r in rules.items() if not r["enabled"]}
    assert off == {
        "gpu-idle": "pyproject.toml",
        "sync-point": "pyproject.toml",
        "pageable-copy": "--config ci.toml",
    }
    settings = json.loads(cli("rules", "--json", *ci).out)["settings"]
    assert settings == {
        "files": ["pyproject.toml", "--config ci.toml"],
        "fail_on": "medium",
        "fail_on_source": "--config ci.toml",
    }
    # The command line wins: its --fail-on, and its --only runs a rule the files ignore.
    trace = "traces/stall.json.gz"
    assert cli("analyze", trace, *ci).code == 1  # medium, from ci.toml: the stall is high
    result = cli(
        "analyze", trace, *ci, "--fail-on", "high", "--only", "gpu-idle", "--format", "json"
    )
    assert result.code == 0  # only gpu-idle ran (skipped on a CPU trace): nothing at high
    doc = json.loads(result.out)
    assert [s["rule"] for s in doc["skipped"]] == ["gpu-idle"] and doc["findings"] == []


def test_rules_shows_each_value_and_where_it_came_from(cli: Cli, project: Path) -> None:
    assert "Settings: the defaults" in cli("rules").out
    write(
        project / "pyproject.toml",
        '[tool.torchpace]\nignore = ["allocator-churn"]\n'
        "[tool.torchpace.thresholds.gpu-idle]\nmin_idle_fraction = 0.3\n",
    )
    text = cli("rules").out
    assert "Settings from pyproject.toml; 1 rule off." in text
    assert "  allocator-churn  [off: pyproject.toml]" in text
    assert "thresholds: min_idle_fraction=0.3 [pyproject.toml], launch_gap_us=15.0" in text


def test_overrides_apply_to_analyze_paths_they_match(cli: Cli, project: Path) -> None:
    write(
        project / "pyproject.toml",
        '[[tool.torchpace.overrides]]\npaths = ["traces/cpu"]\nignore = ["dataloader-stall"]\n',
    )
    (project / "traces" / "cpu").mkdir()
    shutil.copy(STALL, project / "traces" / "cpu" / "stall.json.gz")
    assert "dataloader-stall" in cli("analyze", "traces/stall.json.gz").out  # not matched
    assert "dataloader-stall" not in cli("analyze", "traces/cpu/stall.json.gz").out  # under it


def test_config_file_errors(cli: Cli, project: Path) -> None:
    missing = cli("analyze", "traces/stall.json.gz", "--config", "nope.toml")
    assert missing.code == 2 and "--config nope.toml: no such file" in missing.err
    write(project / "pyproject.toml", '[project]\nname = "x"\n')
    bare = cli("rules", "--config", "pyproject.toml")
    assert bare.code == 2 and "has no [tool.torchpace] table" in bare.err


def test_errors_name_the_file_and_table_they_come_from(cli: Cli, project: Path) -> None:
    write(project / "ci.toml", 'fail-on = "often"\n')
    top_level = cli("rules", "--config", "ci.toml")
    assert top_level.code == 2
    assert "error: --config ci.toml: fail-on = 'often'; choose one of" in top_level.err
    write(project / "other.toml", '[tool.torchpace]\nfail-on = "often"\n')
    nested = cli("rules", "--config", "other.toml")
    assert "error: --config other.toml: [tool.torchpace] fail-on = 'often'" in nested.err
