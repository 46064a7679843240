"""The short-command shortcuts (torchpace.teardown): on only inside the context, and a real
command line still ends with the command's status."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from torchpace import teardown

SLEEPY = (
    Path(__file__).parents[1]
    / "fixtures"
    / "traces"
    / "loader_workers"
    / "cpu_sleepy_loader.json.gz"
)


def test_off_changes_nothing() -> None:
    held = object()
    with teardown.no_teardown(False) as finish:
        assert gc.isenabled()
        teardown.keep(held)
        assert finish(3) == 3
    assert teardown._KEPT.get() is None


def test_on_inside_only() -> None:
    assert gc.isenabled()
    with teardown.no_teardown(True):
        assert not gc.isenabled()
        teardown.keep("decoded")
        assert teardown._KEPT.get() == ["decoded"]
    assert gc.isenabled() and teardown._KEPT.get() is None


def test_a_command_line_exits_with_its_status_and_its_output() -> None:
    for fail_on, code in (("low", 1), (None, 0)):
        args = [sys.executable, "-m", "torchpace", "analyze", str(SLEEPY), "--format", "json"]
        args += ["--fail-on", fail_on] if fail_on else []
        out = subprocess.run(args, capture_output=True, text=True)
        assert out.returncode == code, out.stderr
        assert out.stdout.startswith("{") and out.stdout.rstrip().endswith("}")
