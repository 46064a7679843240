"""`torchpace bench` end to end, in process, on tiny workloads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchpace.cli.main import main

TINY = [
    "bench",
    "--size",
    "tiny",
    "--steps",
    "2",
    "--warmup",
    "0",
    "--repeat",
    "1",
    "--max-repeat",
    "1",  # no rounds added: these runs check the command, not the speed
    "--workers",
    "1",
    "--compile-backend",
    "eager",
]


def test_writes_json_lines_and_prints_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.json"
    code = main(
        [*TINY, "--workload", "text", "--techniques", "workers", "bucketing", "-o", str(out)]
    )
    assert code == 0
    printed = capsys.readouterr()
    assert "baseline: naive loop" in printed.out and "tokens/s" in printed.out
    assert f"wrote {out}" in printed.err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    names = [r["config"]["name"] for r in records if r["type"] == "config"]
    assert names == [
        "baseline",
        "workers",
        "bucketing",
        "+ workers",
        "+ bucketing",
        "ceiling: data on device",
    ]


def test_from_rerenders_a_saved_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "run.json"
    assert main([*TINY, "--techniques", "workers", "--no-ceiling", "-o", str(saved)]) == 0
    capsys.readouterr()
    page = tmp_path / "run.html"
    assert main(["bench", "--from", str(saved), "-o", str(page)]) == 0
    assert "workers" in page.read_text() and "baseline: naive loop" in capsys.readouterr().out


def test_from_a_file_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}\n')
    assert main(["bench", "--from", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"torchpace: error: --from '{bad}': not a torchpace bench JSON lines file" in err
    assert main(["bench", "--from", str(tmp_path / "missing.json")]) == 2
    assert "no such file; give a .json file torchpace bench wrote" in capsys.readouterr().err


def test_html_output_from_the_extension(tmp_path: Path) -> None:
    out = tmp_path / "results.html"
    assert main([*TINY, "--techniques", "channels-last", "--no-ceiling", "-o", str(out)]) == 0
    assert out.read_text().startswith("<!doctype html>")


def test_json_to_stdout_with_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TINY, "--techniques", "pin-memory", "--no-ceiling", "--format", "json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["type"] for r in records] == ["config", "skipped"]
    assert records[1]["skipped"]["reason"].startswith("only helps with an accelerator")


def test_user_workload_file_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).parents[2] / "examples" / "bench_workload.py"
    assert (
        main([*TINY, "--workload", str(example), "--techniques", "checkpointing", "--no-ceiling"])
        == 0
    )
    out = capsys.readouterr().out
    assert "tabular-mlp" in out and "checkpointing" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--techniques", "warp-drive"],
            "unknown technique 'warp-drive'; known techniques: workers,",
        ),
        (["--device", "cuda"], "--device cuda, but this torch"),
        (
            ["-o", "results.csv"],
            "cannot tell the report format from 'results.csv': unknown extension '.csv'; use one of .json",
        ),
        (["--steps", "0"], "steps must be 1 or more; got 0; see torchpace bench --help"),
        (["--max-repeat", "0"], "max_repeat (0) must be at least repeat (1); see torchpace"),
        (
            ["--workload", "nope.py"],
            "workload 'nope.py' is neither a built-in (vision, text) nor an existing file",
        ),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    if argv[:2] == ["--device", "cuda"] and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main([*TINY, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("torchpace: error: ") and message in err and "\n" not in err


def test_list_names_every_technique(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert (
        out.splitlines()[0].startswith("workers ")
        and "checkpointing" in out
        and len(out.splitlines()) == 15
    )


def test_cli_module_does_not_import_torch() -> None:
    code = "import sys, torchpace.cli.main as m; m.build_parser(); print('torch' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, check=True
    )
    assert done.stdout.strip() == "False"


def test_budget_leaves_out_what_does_not_fit_and_still_writes(tmp_path: Path) -> None:
    """A budget no run fits in: the baseline is measured (round 0 opens with it), every other
    configuration is listed as not measured, and the results are written all the same."""
    out = tmp_path / "results.json"
    args = [*TINY, "--techniques", "workers", "--no-ceiling", "--budget", "1e-9", "-o", str(out)]
    assert main(args) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["config"]["name"] for r in records if r["type"] == "config"] == ["baseline"]
    assert {
        r["failed"]["name"]: r["failed"]["reason"] for r in records if r["type"] == "failed"
    } == {"num_workers=1": "not measured: time budget"}


def test_budget_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TINY, "--budget", "0"]) == 2
    assert "budget must be positive, got 0; see torchpace bench --help" in capsys.readouterr().err
