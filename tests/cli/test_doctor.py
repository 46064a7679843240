"""`torchpace doctor` end to end, in a subprocess like a user's shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).parents[1] / "doctor" / "scripts"


def doctor(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "torchpace", "doctor", "--warmup", "2", "--steps", "3"]
    cmd += ["--out", str(tmp_path / "out"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=dict(os.environ))


def test_json_report_with_live_findings_notes_and_trace(tmp_path: Path) -> None:
    proc = doctor(tmp_path, "--format", "json", str(SCRIPTS / "conv_bias_bn.py"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert "conv-bias-before-bn" in {f["rule"] for f in report["findings"]}
    notes = " ".join(report["notes"])
    assert "steps are optimizer.step() calls; 2 warm-up step(s) skipped, 3 profiled" in notes
    assert "ui.perfetto.dev" in notes
    traces = list((tmp_path / "out").glob("*.pt.trace.json.gz"))
    assert len(traces) == 1


def test_failing_script_shows_its_traceback_keeps_the_report_and_exits_non_zero(
    tmp_path: Path,
) -> None:
    proc = doctor(tmp_path, "-o", str(tmp_path / "r.json"), str(SCRIPTS / "raises.py"))
    assert proc.returncode == 1
    assert "RuntimeError: boom at step 6" in proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert any("exited with status 1" in n for n in report["notes"])


def test_sys_exit_status_is_passed_on(tmp_path: Path) -> None:
    assert doctor(tmp_path, str(SCRIPTS / "sys_exit.py")).returncode == 3


def test_no_steps_is_a_clear_message(tmp_path: Path) -> None:
    proc = doctor(tmp_path, str(SCRIPTS / "no_steps.py"))
    assert proc.returncode == 2
    assert "sum: 3.0" in proc.stdout
    assert "torchpace: error: no training steps were found" in proc.stderr


def test_fail_on_gates_on_live_findings(tmp_path: Path) -> None:
    proc = doctor(tmp_path, "--fail-on", "high", str(SCRIPTS / "debug_api.py"))
    assert proc.returncode == 1
    assert "debug-api-enabled" in proc.stderr


def test_bad_options_are_one_line_errors(tmp_path: Path) -> None:
    proc = doctor(tmp_path, "--steps", "0", str(SCRIPTS / "forever.py"))
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("torchpace: error: --steps must be 1 or more; got 0")
    proc = doctor(tmp_path, "missing.py")
    assert proc.returncode == 2
    assert "torchpace: error: script 'missing.py' not found" in proc.stderr
    proc = doctor(tmp_path, "--only", "no-such-rule", str(SCRIPTS / "forever.py"))
    assert proc.returncode == 2 and "unknown rule 'no-such-rule'" in proc.stderr


def test_json_on_stdout_is_the_report_alone(tmp_path: Path) -> None:
    """`doctor --format json > out.json` held the script's prints before the report."""
    proc = doctor(tmp_path, "--full", "--format", "json", str(SCRIPTS / "finishes.py"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tool"] == "torchpace"
    assert "script reached its end" in proc.stderr  # the script's own output is kept


def test_an_output_folder_that_does_not_exist_is_refused_before_the_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "touch.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    proc = doctor(tmp_path, "-o", str(tmp_path / "no" / "r.json"), str(script))
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("torchpace: error: cannot write the report to")
    )
    assert "does not exist" in proc.stderr and not marker.exists()
