"""Output that cannot be written (a full disk, a closed pipe) is one line and exit 2, never exit 1.

Exit 1 means "findings at or above --fail-on" to CI; a traceback there would send people hunting a
bug in the report instead of the disk.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TRACE = (
    Path(__file__).resolve().parents[1] / "fixtures/traces/loader_workers/cpu_sleepy_loader.json.gz"
)
COMMANDS = [
    ["analyze", str(TRACE)],
    ["analyze", str(TRACE), "--format", "md"],
    ["rules"],
    ["env"],
    ["explain", "gpu-idle"],
]


def _torchpace(args: list[str], stdout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchpace", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("torchpace: error: cannot write to stdout: ")
    return lines[0]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:1] + a[2:]))
def test_a_full_disk_is_one_line_and_exit_2(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = _torchpace(args, full.fileno())
    assert done.returncode == 2
    assert "no space left" in _one_error_line(done.stderr)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:1] + a[2:]))
def test_a_closed_pipe_is_one_line_and_exit_2(args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written, as after `| head -c1`
    try:
        done = _torchpace(args, write_end)
    finally:
        os.close(write_end)
    assert done.returncode == 2
    assert "closed the pipe" in _one_error_line(done.stderr)
