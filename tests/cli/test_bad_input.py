"""Bad input through the CLI: exit 2 and one line naming the file and the fix, never a traceback."""

from __future__ import annotations

import gzip
import json
import os
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


def test_a_fifo_is_refused_at_once(cli: Cli, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.json")  # no writer: reading it would block for ever
    line = one_error_line(cli("analyze", tmp_path / "pipe.json"))
    assert "pipe.json is a FIFO (named pipe), not a trace file" in line


CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"


def _copy_ranks(folder: Path, to: Path) -> list[Path]:
    for f in folder.glob("*.json.gz"):
        (to / f.name).write_bytes(f.read_bytes())
    return sorted(to.glob("*.json.gz"))


def test_a_bad_rank_file_is_left_out_and_named(cli: Cli, tmp_path: Path) -> None:
    files = _copy_ranks(CORPUS / "param_v100_dlrm_8rank", tmp_path)
    files[3].write_bytes(files[3].read_bytes()[:5000])  # cut short in a copy
    (tmp_path / "config.json").write_text('{"lr": 0.1, "batch_size": 512}')
    result = cli("analyze", tmp_path, "--format", "json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert len(doc["ranks"]) == 7
    left_out = [n for n in doc["notes"] if n.startswith("left out of the analysis: ")]
    assert [n.split(": ", 1)[1].split(" ")[0] for n in left_out] == ["config.json", files[3].name]
    assert "config.json is not a torch.profiler trace: no 'traceEvents' list" in left_out[0]
    assert "is not a valid gzip file" in left_out[1]


def test_a_folder_of_bad_files_is_one_error(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    (tmp_path / "rank0.json").write_text('{"traceEvents": [')
    line = one_error_line(cli("analyze", tmp_path))
    assert line.startswith(f"torchpace: error: {tmp_path}: none of its 2 trace files can be read: ")
    assert "config.json is not a torch.profiler trace" in line and "rank0.json is not valid" in line


def test_two_event_lists_give_one_report_whatever_the_jobs(cli: Cli, tmp_path: Path) -> None:
    halves = []
    for steps in (1, 3):  # the first list holds one step, the second three
        ops = events(*[f"aten::op{i % 7}" for i in range(3000)])["traceEvents"]
        for n in range(steps):
            ops.insert(0, {**ops[0], "name": f"ProfilerStep#{n}", "ts": n * 100_000, "dur": 99_000})
        halves.append(json.dumps(ops))
    path = tmp_path / "two_lists.json"
    path.write_text(f'{{"traceEvents": {halves[0]}, "traceEvents": {halves[1]}}}')
    reports = {j: cli("analyze", path, "--format", "json", "-j", j).out for j in "1234"}
    assert len(set(reports.values())) == 1  # the last list wins, in one process or in several
    assert json.loads(reports["1"])["header"]["step_count"] == 3


RANKS = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "ddp_gloo_2rank" / "balanced"
NOT_A_FILE = "not a trace file; give a .json or .json.gz file (copy a stream to a file first)"


def _hostile_entries(folder: Path) -> None:
    """A link loop, a FIFO without a writer, a dangling link, a link to /dev/zero, a folder."""
    (folder / "loop.json").symlink_to("loop.json")
    os.mkfifo(folder / "pipe.json")  # reading it would block until a writer came
    (folder / "dangling.json").symlink_to("missing.json")
    (folder / "zero.json").symlink_to("/dev/zero")  # reading it would never end
    (folder / "sub.json").mkdir()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("jobs", ["1", "2"])  # in this process, and in forked workers
def test_a_rank_folder_names_every_entry_it_leaves_out(cli: Cli, tmp_path: Path, jobs: str) -> None:
    _copy_ranks(RANKS, tmp_path)
    _hostile_entries(tmp_path)
    (tmp_path / "notes.txt").write_text("not a trace")
    result = cli("analyze", tmp_path, "--format", "json", "-j", jobs)
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert len(doc["ranks"]) == 2
    prefix = "left out of the analysis: "
    left_out = [n.removeprefix(prefix) for n in doc["notes"] if n.startswith(prefix)]
    assert left_out[0] == (
        f"{tmp_path / 'dangling.json'} is a symbolic link to 'missing.json', which does not "
        "exist; fix the link"
    )
    assert left_out[1].startswith(f"{tmp_path / 'loop.json'}: cannot be read (")  # ELOOP
    assert left_out[2:] == [
        f"{tmp_path / 'pipe.json'} is a FIFO (named pipe), {NOT_A_FILE}",
        f"{tmp_path / 'sub.json'} is a directory, {NOT_A_FILE}",
        f"{tmp_path / 'zero.json'} is a device, {NOT_A_FILE}",
        "notes.txt: not named *.json or *.json.gz",
    ]


@pytest.mark.timeout(120)
def test_a_folder_of_unusable_entries_is_one_error(cli: Cli, tmp_path: Path) -> None:
    _hostile_entries(tmp_path)
    line = one_error_line(cli("analyze", tmp_path))
    assert line.startswith(f"torchpace: error: {tmp_path}: none of its 5 trace files can be read: ")
    assert "dangling.json is a symbolic link to 'missing.json'" in line and "and 3 more" in line


def test_an_unreadable_folder_is_one_error(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _copy_ranks(RANKS, tmp_path)

    def refused(path: Any = ".") -> Any:  # what chmod 000 gives, also when run as root
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "scandir", refused)
    monkeypatch.setattr(os, "listdir", refused)
    line = one_error_line(cli("analyze", tmp_path))
    assert line == (
        f"torchpace: error: {tmp_path}: cannot list the folder (Permission denied); check its "
        f"permissions (chmod u+rx {tmp_path}) or give one trace file"
    )


def test_a_lone_surrogate_in_a_name_is_read(cli: Cli, tmp_path: Path) -> None:
    doc = json.dumps(events("aten::mm", "evil\ud800name", "aten::add"))  # escaped as \ud800
    assert "\\ud800" in doc
    (tmp_path / "t.json").write_text(doc)
    result = cli("analyze", tmp_path / "t.json", "--format", "json")
    assert result.code == 0, result.err
    assert (
        "1 lone UTF-16 surrogate escape (\\ud800-\\udfff) in strings read as U+FFFD"
        in (json.loads(result.out)["notes"])
    )
