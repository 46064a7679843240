"""`torchpace compare` on the command line: formats from -o, exit codes, errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
Cli = Callable[..., Any]
BEFORE = TRACES / "loader_workers" / "cpu_sleepy_loader.json.gz"
AFTER = TRACES / "loader_workers" / "cpu_sleepy_loader_4_workers.json.gz"


def test_text_on_stdout(cli: Cli) -> None:
    r = cli("compare", BEFORE, AFTER)
    assert r.code == 0 and "verdict: AFTER is 5.48x faster" in r.out
    assert "step time by phase" in r.out and "findings" in r.out


def test_format_from_the_output_extension(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "diff.json"
    r = cli("compare", BEFORE, AFTER, "-o", out)
    assert r.code == 0 and json.loads(out.read_text())["verdict"] == "faster"
    assert "AFTER is 5.48x faster" in r.err
    md = tmp_path / "diff.md"
    assert cli("compare", BEFORE, AFTER, "-o", md).code == 0
    assert md.read_text().startswith("## torchpace compare")


def test_bad_input_exits_2_with_one_line(cli: Cli, tmp_path: Path) -> None:
    r = cli("compare", tmp_path / "nope.json", AFTER)
    assert r.code == 2 and "no such file or folder" in r.err and "Traceback" not in r.err
    r = cli("compare", BEFORE, AFTER, "--top", "0")
    assert r.code == 2 and "--top 0" in r.err
    r = cli("compare", BEFORE, AFTER, "-o", tmp_path / "x.pdf")
    assert r.code == 2 and "cannot tell the report format" in r.err
