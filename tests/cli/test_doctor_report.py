"""`torchpace doctor`'s report as a user sees it: titled by the script, a short "Not analysed"
with no profiler option to add (the doctor owns the profiler), and the project's settings applied.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "doctor" / "scripts"


def test_doctor_report_on_a_cpu_machine(tmp_path: Path) -> None:
    # The project's settings: the debug switch is known and accepted, medium findings gate CI.
    # (loader-config and dataloader-stall are ignored too: the script's single-process DataLoader
    # takes 5-12% of its 1.5 ms step depending on the machine's load, so either may or may not
    # flag it, LOW or MEDIUM: a timing, not this test's point; cpu-contention names the
    # machine's load when other processes take the cores, so it comes and goes with the load, and
    # no-mixed-precision is then not judged, a line more under "Not analysed")
    ignored = ["debug-api-enabled", "loader-config", "dataloader-stall", "cpu-contention",
               "no-mixed-precision"]  # fmt: skip
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.torchpace]\nignore = {ignored!r}\nfail-on = "medium"\n'.replace("'", '"')
    )
    script = SCRIPTS / "debug_api.py"
    done = subprocess.run(
        [sys.executable, "-m", "torchpace", "doctor", "--warmup", "2", "--steps", "3",
         "--out", str(tmp_path / "out"), str(script), "--iters", "12"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, env=dict(os.environ),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr  # the only finding was ignored: nothing to gate
    report = done.stdout
    assert report.startswith(f"torchpace report: {script} --iters 12\nVerdict: ")  # first
    assert "debug-api-enabled" not in report and "loader-config" not in report
    assert "dataloader-stall" not in report
    section = report[report.index("Not analysed") :].split("\n\n", 1)[0].splitlines()
    assert len(section) <= 3, section
    assert "ProfilerActivity" not in report and "torch.profiler.profile(" not in report


def test_a_run_without_verify_names_the_findings_verify_could_measure() -> None:
    from torchpace.doctor.diagnosis import Diagnosis
    from torchpace.doctor.finding import Finding, Severity
    from torchpace.trace.summary import Breakdown, TraceInfo
    from torchpace.verify import verify_hint

    anomaly = Finding(
        "debug-api-enabled",
        Severity.HIGH,
        "anomaly",
        {"debug_apis": ["torch.autograd.set_detect_anomaly(True): every backward op is checked"]},
        "torch.autograd.set_detect_anomaly(False)",
    )
    bias = Finding("conv-bias-before-bn", Severity.LOW, "bias", {}, "bias=False")  # a code edit
    info = TraceInfo(path="t.json", device_kind="cpu")
    steps = Breakdown(steps=(), median_step_ms=30.0, median_phase_ms={})
    hinted = verify_hint(Diagnosis(info, steps, (anomaly, bias)), "train.py --epochs 1")
    (note,) = hinted.notes
    assert "debug-api-enabled" in note and "conv-bias-before-bn" not in note
    assert note.endswith("torchpace doctor --verify train.py --epochs 1")
    unchanged = Diagnosis(info, steps, (bias,))
    assert verify_hint(unchanged, "train.py") is unchanged
