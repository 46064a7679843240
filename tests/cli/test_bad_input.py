"""Bad input through the CLI: exit 2 and one line naming the file and the fix, never a traceback."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., Any]  # conftest's cli fixture: (code, out, err) of one run


def one_error_line(result: Any) -> str:
    """The single `torchpace: error:` line a bad input must produce."""
    assert result.code == 2
    assert result.out == ""
    assert "Traceback" not in result.err
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("torchpace: error: ")
    return lines[0]


def events(*names: str) -> dict[str, Any]:
    """A minimal current-format trace: one cpu_op per name, 100 us each, back to back."""
    return {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": n,
                "pid": 1,
                "tid": 1,
                "ts": 100 * i,
                "dur": 90,
                "args": {},
            }
            for i, n in enumerate(names)
        ]
    }


def test_missing_path(cli: Cli, tmp_path: Path) -> None:
    line = one_error_line(cli("analyze", tmp_path / "nope.json"))
    assert "nope.json" in line and "no such file or directory; check the path" in line


def test_empty_file(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_text("")
    line = one_error_line(cli("analyze", tmp_path / "empty.json"))
    assert "empty.json is empty" in line and "export_chrome_trace" in line


def test_truncated_json(cli: Cli, tmp_path: Path) -> None:
    text = json.dumps(events("aten::mm", "aten::add"))
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    line = one_error_line(cli("analyze", tmp_path / "cut.json"))
    assert "cut.json is not valid JSON" in line and "re-export" in line


def test_corrupt_gzip(cli: Cli, tmp_path: Path) -> None:
    data = gzip.compress(json.dumps(events("aten::mm")).encode())
    (tmp_path / "bad.json.gz").write_bytes(data[:20] + b"\x00" * 16 + data[36:])
    line = one_error_line(cli("analyze", tmp_path / "bad.json.gz"))
    assert "bad.json.gz is not a valid gzip file" in line and "re-copy or re-export" in line


@pytest.mark.parametrize("content", ["[1, 2, 3]", '{"schema": "something else"}'])
def test_json_that_is_not_a_trace(cli: Cli, tmp_path: Path, content: str) -> None:
    (tmp_path / "other.json").write_text(content)
    line = one_error_line(cli("analyze", tmp_path / "other.json"))
    assert "other.json is not a torch.profiler trace" in line and "export_chrome_trace" in line


def test_trace_with_no_events(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "none.json").write_text('{"traceEvents": []}')
    line = one_error_line(cli("analyze", tmp_path / "none.json"))
    assert "none.json has no events" in line and "prof.step()" in line


def test_directory_without_traces(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a trace")
    line = one_error_line(cli("analyze", tmp_path))
    assert f"{tmp_path} holds no trace files (*.json, *.json.gz)" in line
    assert "tensorboard_trace_handler" in line


def test_unknown_format(cli: Cli, tmp_path: Path) -> None:
    line = one_error_line(cli("analyze", tmp_path / "t.json", "--format", "xml"))
    assert line == "torchpace: error: unknown --format 'xml'; choose one of: text, json, md, html"


def test_output_with_unknown_extension(cli: Cli, tmp_path: Path) -> None:
    line = one_error_line(cli("analyze", tmp_path / "t.json", "-o", "report.pdf"))
    assert line.startswith("torchpace: error: cannot tell the report format from 'report.pdf'")
    assert ".json, .md" in line and ".html" in line and "--format (text, json, md, html)" in line


def test_conflicting_output_and_format(cli: Cli, tmp_path: Path) -> None:
    line = one_error_line(cli("analyze", tmp_path / "t.json", "-o", "r.json", "--format", "md"))
    assert line == (
        "torchpace: error: -o 'r.json' implies --format json but --format md was given; "
        "drop one of them or make them agree"
    )


def test_no_profiler_steps_is_one_window_and_said(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "nosteps.json").write_text(
        json.dumps(events("aten::mm", "aten::add", "aten::relu"))
    )
    result = cli("analyze", tmp_path / "nosteps.json")
    assert result.code == 0
    assert "no ProfilerStep#" in result.out
    assert "the whole trace is analysed as one window" in result.out
